/* pthread_cancel of threads sleeping, waiting on a condvar (the mutex is held again in
 * the cleanup handler), polling with pthread_testcancel, and with cancellation disabled
 * for a while: all end with PTHREAD_CANCELED after running their cleanup handlers. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
#include <errno.h>
static int cleaned[4];
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER; static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static void cleanup(void *a) { cleaned[(long)a] = 1; }
static void cleanup_unlock(void *a) { cleaned[(long)a] = 1; pthread_mutex_unlock(&m); }
void *sleeper(void *a) { pthread_cleanup_push(cleanup, a); for (;;) sleep(10); pthread_cleanup_pop(0); return 0; }
void *condw(void *a) { pthread_mutex_lock(&m); pthread_cleanup_push(cleanup_unlock, a); for (;;) pthread_cond_wait(&c, &m); pthread_cleanup_pop(0); return 0; }
void *spinner(void *a) { pthread_cleanup_push(cleanup, a); for (;;) { pthread_testcancel(); usleep(100); } pthread_cleanup_pop(0); return 0; }
void *disabled(void *a) { int old; pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old); usleep(30000); pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old); pthread_cleanup_push(cleanup, a); pthread_testcancel(); pthread_cleanup_pop(0); return (void*)7; }
int main() {
  void *(*f[4])(void*) = {sleeper, condw, spinner, disabled}; pthread_t t[4];
  for (long i = 0; i < 4; i++) pthread_create(&t[i], 0, f[i], (void*)i);
  usleep(10000);
  for (int i = 0; i < 4; i++) pthread_cancel(t[i]);
  for (int i = 0; i < 4; i++) { void *r; pthread_join(t[i], &r); printf("t%d canceled=%d cleaned=%d\n", i, r == PTHREAD_CANCELED, cleaned[i]); }
  pthread_mutex_lock(&m); pthread_mutex_unlock(&m); printf("mutex free\n");
  int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active"); fprintf(stderr, "preloaded=%d\n", active ? active() : 0);
}
