/* cmd_session.c - `multidecode session info FILE` and `multidecode session export FILE
 * --markdown`: what a saved session holds, and its tree's texts as Markdown (with --keep N,
 * only the N branches the forest's prune policy ranks best, prune.h).
 *
 * Neither runs the model: a session file holds tokens, so both only need the model's
 * tokenizer (for text) and its identity (to check the session belongs to it), read from
 * the GGUF file's header without loading the weights. Without -m, info shows token
 * counts only and export writes the branch texts the file was saved with (token ids for
 * a file that has none). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "forest/prune.h"
#include "session/session.h"
#include "app.h"
#include "prompt.h"
#include "session_opts.h"

/* The first line of --help, which a mistyped option prints instead of the whole help. */
#define SESSION_USAGE "usage: multidecode session info FILE [-m MODEL]"

static void session_usage(FILE *f) {
    fprintf(f, SESSION_USAGE "\n"
               "       multidecode session export FILE --markdown [-m MODEL] [-o OUT] [--keep N]\n\n"
               "info     what the session holds: its model, settings and forest; with -m,\n"
               "         whether it was saved with that model\n"
               "export   the tree's texts as Markdown: an outline with shared prefixes shown\n"
               "         once, then one section per branch (without -m: the texts saved in\n"
               "         the file, or token ids when it has none)\n\n"
               "  -m, --model PATH     the GGUF model (only its tokenizer and header are read)\n"
               "  -o, --output FILE    write the export to FILE (default: stdout)\n"
               "      --markdown       the export format (the only one)\n"
               "      --keep N         export the N branches whose generated tokens have the best\n"
               "                       mean log-probability (the others are left out)\n"
               "      --force-model    export even when the session was saved with another model\n");
}

/* The model's tokenizer and identity, from its GGUF header only. */
typedef struct session_model {
    gguf_ctx *g;
    tok *tk;
    session_model_id id;
} session_model;

static st_code session_model_open(session_model *sm, const char *path, st_err *err) {
    memset(sm, 0, sizeof *sm);
    if (!(sm->g = gguf_open(path, err))) return err->code;
    st_code rc = ST_OK;
    if (!(sm->tk = tok_from_gguf(sm->g, err)) ||
        (rc = session_model_id_of(sm->g, path, tok_n_vocab(sm->tk), &sm->id, err))) {
        rc = rc ? rc : err->code;
        tok_free(sm->tk);
        gguf_close(sm->g);
        memset(sm, 0, sizeof *sm);
    }
    return rc;
}

static void session_model_close(session_model *sm) {
    tok_free(sm->tk);
    gguf_close(sm->g);
}

static void session_print_info(const char *path, const forest *f, const session_settings *s,
                               const session_model_id *saved, const session_model *sm) {
    char buf[400];
    /* every string read from the file is printed escaped (prompt_show_bare) */
    printf("session: %s\nformat: %s v%d\nmodel: ", path, SESSION_FORMAT, SESSION_VERSION);
    prompt_show_bare(stdout, session_model_id_str(saved, buf, sizeof buf));
    printf(", vocabulary %d\n", saved->n_vocab);
    if (sm) {
        printf("  %s ", session_model_id_same(saved, &sm->id) ? "matches" : "DIFFERS from");
        prompt_show_bare(stdout, session_model_id_str(&sm->id, buf, sizeof buf));
        printf("\n");
    }
    printf("sampler: temperature %g, top-k %d, top-p %g, min-p %g, seed %llu\n", s->sample.temp,
           s->sample.top_k, s->sample.top_p, s->sample.min_p, (unsigned long long)s->sample.seed);
    printf("chat template: ");
    prompt_show_bare(stdout, s->chat_template[0] ? s->chat_template : "none");
    printf("\n");
    for (int32_t i = 0; i < s->n_kv; i++) {
        printf("setting: ");
        prompt_show_bare(stdout, s->kv[i].key);
        printf(" = ");
        prompt_show_bare(stdout, s->kv[i].value);
        printf("\n");
    }
    int32_t n_book = 0, n_fin = 0, n_meta = 0, max_depth = 0, n_scored = 0;
    for (int32_t i = forest_dfs_first(f); i >= 0; i = forest_dfs_next(f, i)) {
        const forest_node *n = forest_node_at(f, i);
        n_book += (n->flags & FOREST_BOOKMARK) != 0;
        n_fin += (n->flags & FOREST_FINISHED) != 0;
        n_scored += n->logprob == n->logprob;
        n_meta += session_meta_get(s->meta, f, forest_id_at(f, i), NULL, NULL);
        if (n->depth > max_depth) max_depth = n->depth;
    }
    printf("forest: %d nodes in %d trees, %d leaves, deepest position %d, %d scored, "
           "%d bookmarked, %d finished, %d with strategy metadata; top-k %d\n",
           forest_n_live(f), forest_roots(f, NULL, 0), forest_leaves(f, NULL, 0), max_depth,
           n_scored, n_book, n_fin, n_meta, forest_top_k(f));
}

int cmd_session(int argc, char **argv) {
    static const struct option lo[] = {{"model", 1, 0, 'm'}, {"output", 1, 0, 'o'},
                                       {"markdown", 0, 0, 'D'}, {"help", 0, 0, 'h'},
                                       {"force-model", 0, 0, 'F'}, {"keep", 1, 0, 'K'}, {0, 0, 0, 0}};
    const char *model_path = NULL, *out_path = NULL;
    bool markdown = false, force = false;
    int64_t keep = -1;
    int ch;
    while ((ch = getopt_long(argc, argv, "m:o:h", lo, NULL)) != -1) {
        switch (ch) {
        case 'm': model_path = optarg; break;
        case 'o': out_path = optarg; break;
        case 'D': markdown = true; break;
        case 'F': force = true; break;
        case 'K':
            if (app_opt_int("--keep", optarg, 0, 1 << 30, &keep)) return 2;
            break;
        case 'h': session_usage(stdout); return 0;
        default: return app_usage_error("%s; see multidecode session --help", SESSION_USAGE);
        }
    }
    if (argc - optind != 2) {
        session_usage(stderr);
        return 2;
    }
    const char *what = argv[optind], *path = argv[optind + 1];
    bool info = !strcmp(what, "info");
    if (!info && strcmp(what, "export"))
        return app_usage_error("session: unknown action '%s' (info or export)", what);
    if (!info && !markdown) return app_usage_error("session export needs --markdown");
    if (info && (markdown || out_path || keep >= 0))
        return app_usage_error("session info takes no --markdown, -o or --keep");

    st_err err = {0};
    session_model sm;
    if (model_path && session_model_open(&sm, model_path, &err)) return app_fail(&err);
    session_load_params p = session_load_default_params();
    if (model_path) {
        p.model = &sm.id;
        p.force = info || force; /* info reports a mismatch instead of refusing */
    }
    session_settings s;
    session_model_id saved;
    forest *f = session_load(path, &p, &s, &saved, &err);
    int rc = 0;
    if (f) app_session_warn(path, &s);
    if (!f) {
        rc = app_fail(&err);
    } else if (info) {
        session_print_info(path, f, &s, &saved, model_path ? &sm : NULL);
    } else {
        const tok *tk = model_path ? sm.tk : NULL;
        prune_params pp = prune_default_params();
        pp.score = PRUNE_SCORE_MEAN;
        if (keep >= 0 && prune_keep_top(f, (int32_t)keep, &pp, NULL, &err)) rc = app_fail(&err);
        else if (out_path ? session_save_markdown(out_path, f, tk, &s, &saved, &err)
                     : session_export_markdown(stdout, f, tk, &s, &saved, &err))
            rc = app_fail(&err);
    }
    forest_free(f);
    session_settings_free(&s);
    if (model_path) session_model_close(&sm);
    return rc;
}
