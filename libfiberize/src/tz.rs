//! mktime/tzset throttle (issue 4) — being written
