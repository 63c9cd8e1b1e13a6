/* clock.h - the one monotonic clock, for every layer: step times, autosave intervals,
 * timeouts and benches (it never goes back when the wall clock is set). */
#ifndef MD_BASE_CLOCK_H
#define MD_BASE_CLOCK_H

/* Seconds on the monotonic clock since an arbitrary start. */
double mono_now_s(void);

#endif
