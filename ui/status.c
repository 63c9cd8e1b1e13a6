/* status.c - the status line (status.h). */
#include "status.h"

#include <stdio.h>

#include "uline.h"

void ui_status_format(const ui_stats *s, char *out, size_t cap, int width) {
    char buf[512];
    snprintf(buf, sizeof buf, " %s%s%s | %s %d thr | %s | %d nodes | KV %d used %d free | %d rows %.1fms | %.1f tok/s",
             s->model ? s->model : "?", s->mode ? " | typing: " : "", s->mode ? s->mode : "",
             s->backend ? s->backend : "cpu", s->threads, s->job,
             s->nodes, s->kv_used, s->kv_slots - s->kv_used, s->rows, s->step_ms, s->tok_s);
    ui_line l = ui_line_make(out, cap, width, false);
    ui_line_put(&l, buf);
    ui_line_pad(&l);
}
