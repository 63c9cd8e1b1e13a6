/* session_replay.c - settings for --save and the --load replay of the decoding commands
 * (see session_replay.h). */
#include "session_replay.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strategy/merge.h"
#include "forest/step.h"
#include "app.h"

st_code app_session_settings(session_settings *s, const char *cmd, const char *mpath,
                             const sample_params *sp, chat_kind kind, st_err *err) {
    *s = session_settings_default();
    if (sp) s->sample = *sp;
    if (kind != CHAT_NONE) snprintf(s->chat_template, sizeof s->chat_template, "%s", chat_name(kind));
    if (mpath) snprintf(s->model_path, sizeof s->model_path, "%s", mpath);
    if (!(s->meta = session_meta_init())) return st_set(err, ST_ERR_NOMEM, "out of memory");
    return session_settings_set(s, "command", cmd, err);
}

st_code app_session_mark(session_settings *s, const forest *f, forest_id from, forest_id leaf,
                         const char *strategy, uint64_t seed, st_err *err) {
    int32_t stop = from == FOREST_NONE ? -1 : forest_index(from);
    if (!forest_get(f, leaf)) return st_set(err, ST_ERR_ARG, "a stale branch");
    for (int32_t i = forest_index(leaf); i >= 0 && i != stop; i = forest_node_at(f, i)->parent) {
        st_code rc = session_meta_set(s->meta, f, forest_id_at(f, i), strategy, seed, err);
        if (rc) return rc;
    }
    return ST_OK;
}

/* The deepest node of leaf's path that is not generated (the prompt's end), or
 * FOREST_NONE when the whole path is generated. */
static forest_id prompt_end(const forest *f, forest_id leaf) {
    int32_t i = forest_index(leaf);
    while (i >= 0 && !isnan(forest_node_at(f, i)->logprob)) i = forest_node_at(f, i)->parent;
    return i >= 0 ? forest_id_at(f, i) : FOREST_NONE;
}

/* The last up to `max` bytes of text (on a character boundary), for a prompt's end. */
static const char *tail_of(const char *s, size_t max) {
    size_t n = strlen(s);
    if (n <= max) return s;
    const char *p = s + n - max;
    while (*p && ((unsigned char)*p & 0xC0) == 0x80) p++;
    return p;
}

int app_session_replay(const char *cmd, const app_session_opts *so, const prompt_model_opts *mo,
                       bool json, bool quiet) {
    st_err err = {0};
    prompt_model pm;
    if (prompt_model_open(&pm, mo, &err)) return app_fail(&err);
    session_settings s;
    forest *f = app_session_load(so->load, pm.m, mo->path, pm.n_slots, so->force, &s, &err);
    step_plan plan;
    step_plan_init(&plan);
    forest_id *leaves = NULL;
    st_code rc = f ? ST_OK : err.code;
    if (rc) goto out;
    const char *saved_cmd = session_settings_get(&s, "command");
    if (!quiet && saved_cmd && strcmp(saved_cmd, cmd))
        fprintf(stderr, "multidecode: note: session '%s' was saved by '%s', not '%s'\n", so->load,
                saved_cmd, cmd);
    /* recompute: every node is pending, one step computes them all (bitwise the logits
     * the run had, step.h) */
    int32_t n_nodes = forest_n_live(f);
    double t0 = app_now();
    if ((rc = step_forest(f, &plan, pm.ctx, &err))) goto out;
    double t1 = app_now();
    int32_t n_leaves = forest_leaves(f, NULL, 0);
    leaves = malloc(sizeof *leaves * (size_t)(n_leaves > 0 ? n_leaves : 1));
    if (!leaves) {
        rc = st_set(&err, ST_ERR_NOMEM, "out of memory");
        goto out;
    }
    forest_leaves(f, leaves, n_leaves);
    if (json) {
        printf("{\"session\": ");
        prompt_json_str(stdout, so->load);
        printf(", \"command\": ");
        prompt_json_str(stdout, saved_cmd ? saved_cmd : "");
        printf(", \"nodes\": %d, \"branches\": [", n_nodes);
    }
    for (int32_t k = 0; k < n_leaves; k++) {
        forest_id pe = prompt_end(f, leaves[k]);
        char *ptxt = pe == FOREST_NONE ? NULL : merge_branch_text(f, pm.tk, FOREST_NONE, pe, &err);
        char *gtxt = merge_branch_text(f, pm.tk, pe, leaves[k], &err);
        if ((pe != FOREST_NONE && !ptxt) || !gtxt) {
            free(ptxt), free(gtxt);
            rc = err.code;
            goto out;
        }
        int32_t depth = forest_path(f, leaves[k], NULL, 0);
        int32_t n_gen = depth - (pe == FOREST_NONE ? 0 : forest_path(f, pe, NULL, 0));
        const forest_node *nd = forest_get(f, leaves[k]);
        bool fin = nd->flags & FOREST_FINISHED;
        const char *strategy = NULL;
        session_meta_get(s.meta, f, leaves[k], &strategy, NULL);
        if (json) {
            printf("%s\n {\"branch\": %d, \"tokens\": %d, \"generated\": %d, \"finished\": %s, "
                   "\"strategy\": ", k ? "," : "", k, depth, n_gen, fin ? "true" : "false");
            prompt_json_str(stdout, strategy ? strategy : "");
            printf(", \"prompt\": ");
            prompt_json_str(stdout, ptxt ? ptxt : "");
            printf(", \"text\": ");
            prompt_json_str(stdout, gtxt);
            printf("}");
        } else {
            printf("--- branch %d (%d tokens, %d generated%s%s%s)\n", k, depth, n_gen,
                   fin ? ", finished" : "", strategy ? ", by " : "", strategy ? strategy : "");
            if (ptxt) {
                printf("... ");
                prompt_show_str(stdout, tail_of(ptxt, 80), 0);
                printf("\n");
            }
            printf("%s\n", gtxt);
        }
        free(ptxt), free(gtxt);
    }
    if (json) printf("\n]}\n");
    fflush(stdout);
    if (!quiet)
        fprintf(stderr, "%s --load: session '%s': %d nodes recomputed in one step (%d rows) in "
                "%.3f s; %d branches; KV slots used %d\n", cmd, so->load, n_nodes, plan.n_rows,
                t1 - t0, n_leaves, kv_alloc_used(forest_kv(f)));
out:
    free(leaves);
    step_plan_free(&plan);
    forest_free(f);
    session_settings_free(&s);
    prompt_model_close(&pm);
    return rc ? app_fail(&err) : 0;
}
