/* progress.h - the progress line long command runs print on stderr (progress.c). */
#ifndef MD_APP_PROGRESS_H
#define MD_APP_PROGRESS_H

#include <stdbool.h>

/* A progress line on stderr for long strategy runs: at most once a second,
 * after the first second; rewritten in place on a terminal, one line each otherwise. */
typedef struct app_progress {
    double t0, last;
    bool on, tty, shown;
} app_progress;
void app_progress_init(app_progress *p, bool on);
void app_progress_tick(app_progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void app_progress_end(app_progress *p); /* clears a terminal line */

#endif
