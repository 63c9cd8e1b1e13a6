/* spec_opts.c - parsing the speculative-decoding options (spec_opts.h). */
#include "spec_opts.h"

#include <stdio.h>

#include "app.h"

spec_opts spec_default_opts(void) { return (spec_opts){.on = false, .sp = spec_default_params()}; }

int spec_opt(spec_opts *o, int ch, const char *arg) {
    int64_t v;
    switch (ch) {
    case SPEC_OPT_DRAFT: o->on = true; return 0;
    case SPEC_OPT_FIXED: o->sp.adaptive = false; return 0;
    case SPEC_OPT_LA_ALWAYS: o->sp.la_adaptive = false; return 0;
    case SPEC_OPT_LEN:
        if (app_opt_int("--draft-len", arg, 0, 256, &v)) return 2;
        o->sp.draft_len = (int32_t)v;
        return 0;
    case SPEC_OPT_N:
        if (app_opt_int("--drafts", arg, 0, 64, &v)) return 2;
        o->sp.n_drafts = (int32_t)v;
        return 0;
    case SPEC_OPT_ROWS:
        if (app_opt_int("--draft-rows", arg, 0, 4096, &v)) return 2;
        o->sp.max_rows = (int32_t)v;
        return 0;
    case SPEC_OPT_LA: {
        int w, n, g, end = 0;
        if (sscanf(arg, "%d,%d,%d%n", &w, &n, &g, &end) != 3 || arg[end] || w < 1 || w > 4096 ||
            n < 2 || n > 16 || g < 0 || g > 1024 || w * n > 4096)
            return app_usage_error("bad --lookahead '%s': want W,N,G with W >= 1, 2 <= N <= 16, "
                                   "G >= 0 (e.g. 5,4,4)", arg);
        o->sp.la.w = w;
        o->sp.la.n = n;
        o->sp.la.g = g;
        o->on = true;
        return 0;
    }
    default: return -1;
    }
}

const char *spec_opts_describe(const spec_opts *o, char *buf, int cap) {
    const spec_params *p = &o->sp;
    int n = 0;
    if (p->la.w > 0) n = snprintf(buf, (size_t)cap, "lookahead W=%d N=%d G=%d", p->la.w, p->la.n, p->la.g);
    if (p->draft_len > 0 && n < cap)
        snprintf(buf + n, (size_t)(cap - n), "%sprompt lookup + pool (draft length %s%d, %d rows)",
                 n ? " + " : "", p->adaptive ? "<= " : "", p->draft_len, p->max_rows);
    else if (!n) snprintf(buf, (size_t)cap, "no drafts");
    return buf;
}
