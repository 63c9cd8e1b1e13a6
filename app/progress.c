/* progress.c - the progress line of long command runs (progress.h). */
#include "progress.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "base/clock.h"

void app_progress_init(app_progress *p, bool on) {
    p->on = on;
    p->tty = on && isatty(fileno(stderr));
    p->t0 = p->last = mono_now_s();
    p->shown = false;
}

void app_progress_tick(app_progress *p, const char *fmt, ...) {
    if (!p->on) return;
    double now = mono_now_s();
    if (now - p->last < 1.0) return; /* at most once a second, after the first second */
    p->last = now;
    va_list ap;
    va_start(ap, fmt);
    fputs(p->tty ? "\r" : "", stderr);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (%.0f s)%s", now - p->t0, p->tty ? "\033[K" : "\n");
    va_end(ap);
    p->shown = true;
}

void app_progress_end(app_progress *p) {
    if (p->on && p->tty && p->shown) fputs("\r\033[K", stderr);
    p->shown = false;
}
