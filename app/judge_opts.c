/* judge_opts.c - the judge's shared options (judge_opts.h). */
#include "judge_opts.h"

#include <stdlib.h>

#include "app.h"
#include "base/infile.h"

int app_judge_opt(app_judge_opts *o, int ch, const char *arg) {
    st_err err = {0};
    size_t len;
    switch (ch) {
    case 'j': o->question = arg; return 0;
    case JUDGE_OPT_FILE:
        free(o->file_text);
        if (!(o->file_text = infile_read(arg, "judge file", 1 << 20, &len, &err))) return app_fail(&err);
        o->question = o->file_text;
        return 0;
    case JUDGE_OPT_YES: o->yes = arg; return 0;
    case JUDGE_OPT_NO: o->no = arg; return 0;
    default: return -1;
    }
}

void app_judge_opts_free(app_judge_opts *o) {
    free(o->file_text);
    o->file_text = NULL;
}

st_code app_judge_tokens(const prompt_model *pm, chat_kind kind, const app_judge_opts *o, judge_prompt *out,
                         st_err *err) {
    return judge_tokens(pm->tk, kind, NULL, o->question, o->yes, o->no, out, err);
}
