/* options.c - the commands' argument checks and error lines (options.h). */
#include "options.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <getopt.h>

#include "prompt.h"
#include "strategy/cot.h"

int app_fail(const st_err *err) {
    /* messages quote names read from files (keys, tensors, settings): escaped */
    fputs("multidecode: ", stderr);
    prompt_show_bare(stderr, err->msg[0] ? err->msg : st_str(err->code));
    fputc('\n', stderr);
    return 1;
}

int app_usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("multidecode: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

int app_parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    char *end;
    errno = 0; /* strtoll clamps an out-of-range number and says so only in errno */
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int app_parse_float(const char *s, double *out) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite((float)v)) return -1; /* kept as a float */
    *out = v;
    return 0;
}

int app_opt_int(const char *name, const char *s, int64_t lo, int64_t hi, int64_t *out) {
    if (!app_parse_int(s, lo, hi, out)) return 0;
    return app_usage_error("bad %s '%s' (want an integer from %lld to %lld)", name, s,
                           (long long)lo, (long long)hi);
}

int app_opt_u64(const char *name, const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    /* strtoull negates "-1" into a huge value: a sign is refused, not wrapped */
    if (end == s || *end || errno || strchr(s, '-'))
        return app_usage_error("bad %s '%s' (want an integer from 0 to %llu)", name, s,
                               (unsigned long long)UINT64_MAX);
    *out = v;
    return 0;
}

int app_vote_opt(int ch, int o_vote, const char *arg, struct cot_vote_spec *vote, bool *json, bool *quiet) {
    st_err err = {0};
    if (ch == o_vote) return cot_vote_parse(arg, vote, &err) ? app_usage_error("%s", err.msg) : 0;
    if (ch == APP_OPT_VOTE_ALL) vote->all = true;
    else if (ch == 'J') *json = true;
    else if (ch == 'q') *quiet = true;
    else return -1;
    return 0;
}

int app_opt_end(int argc, char **argv, const char *model, const char *cmd) {
    if (optind < argc) return app_usage_error("unexpected argument '%s'", argv[optind]);
    if (!model) return app_usage_error("%s needs a model: -m MODEL", cmd);
    return -1;
}
