//! mktime/tzset exports (issue 4, in progress)
