//! A fixed-capacity batch on the stack: what a waker takes under a lock (wake-ups,
//! expired timers) and handles after releasing it.
//!
//! Not `[Option<T>; N]`: that array is written in full when it is made and read in
//! full when it is dropped (every slot's drop glue), on every pass however few items it
//! held. A [`Batch`] touches only the slots it fills.

use core::mem::MaybeUninit;

/// Up to `N` items, filled by [`push`](Batch::push), emptied by [`drain`](Batch::drain).
pub struct Batch<T, const N: usize> {
    slots: [MaybeUninit<T>; N],
    /// Slots `..len` hold an item not taken yet.
    len: usize,
}

impl<T, const N: usize> Batch<T, N> {
    #[inline]
    pub fn new() -> Self {
        Self { slots: [const { MaybeUninit::uninit() }; N], len: 0 }
    }

    /// How many items it holds.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds nothing.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether another item fits.
    #[inline]
    pub fn has_room(&self) -> bool {
        self.len < N
    }

    /// Adds an item. Panics when full (the callers check [`has_room`](Self::has_room)).
    #[inline]
    pub fn push(&mut self, item: T) {
        self.slots[self.len].write(item);
        self.len += 1;
    }

    /// Takes every item, in the order pushed; the batch is empty at once (items the
    /// iterator is not asked for are dropped with it).
    #[inline]
    pub fn drain(&mut self) -> Drain<'_, T> {
        let n = core::mem::replace(&mut self.len, 0);
        Drain { items: self.slots[..n].iter() }
    }
}

impl<T, const N: usize> Default for Batch<T, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T, const N: usize> Drop for Batch<T, N> {
    fn drop(&mut self) {
        drop(self.drain());
    }
}

/// The items of a [`Batch`], taken out one by one.
pub struct Drain<'a, T> {
    /// Initialised slots not read yet; the batch's length is already 0, so each is
    /// read exactly once, here.
    items: core::slice::Iter<'a, MaybeUninit<T>>,
}

impl<T> Iterator for Drain<'_, T> {
    type Item = T;

    #[inline]
    fn next(&mut self) -> Option<T> {
        // SAFETY: the slots in `items` were written by `push` and are read only here,
        // once each (see the field's comment).
        self.items.next().map(|slot| unsafe { slot.assume_init_read() })
    }
}

impl<T> Drop for Drain<'_, T> {
    fn drop(&mut self) {
        for item in self.by_ref() {
            drop(item);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn drains_in_order_and_drops_what_is_left_once() {
        let token = Rc::new(());
        let mut b: Batch<Rc<()>, 4> = Batch::new();
        for _ in 0..3 {
            b.push(token.clone());
        }
        assert_eq!((b.len(), b.has_room()), (3, true));
        let mut d = b.drain();
        assert!(d.next().is_some());
        drop(d);
        assert!(b.is_empty());
        assert_eq!(Rc::strong_count(&token), 1);
        b.push(token.clone());
        drop(b);
        assert_eq!(Rc::strong_count(&token), 1);
    }
}
