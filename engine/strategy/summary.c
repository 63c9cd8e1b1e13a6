/* summary.c - how a run's results are named and summed up for the hosts (strategy.h):
 * the end names and the one-line "done" summary, built from the uniform results only, so
 * that a new strategy needs no host change. */
#include <stdio.h>
#include <string.h>

#include "strategy/strategy.h"

/* The end-of-generation token a branch ended at, as "end of turn <|im_end|>" into out:
 * grow keeps no token for it; the leaf's top-k has it (the most probable end token
 * there, which greedy decoding picked). */
static void eog_name(const forest *f, const tok *tk, bool chat, forest_id leaf, char *out, size_t cap) {
    int32_t ids[16];
    float lps[16];
    int32_t n = forest_topk(f, leaf, ids, lps, 16);
    for (int32_t i = 0; i < n; i++)
        if (tok_is_eog(tk, ids[i])) {
            const char *pc = tok_piece(tk, ids[i]);
            bool turn = chat && (!pc || strcmp(pc, "<|endoftext|>"));
            snprintf(out, cap, "end of %s %s", turn ? "turn" : "text", pc ? pc : "");
            return;
        }
    snprintf(out, cap, "end of text");
}

/* What a grow-like run did (its results: branches or chains): "+12 tokens, 1 branch;
 * stopped: budget". Chains say how many were kept ("5 of 6 chains, 1 ended at once"): a
 * chain whose first token ends the text leaves no branch. */
static void branch_summary(const strategy *s, const forest *f, const tok *tk, bool chat, bool chains, char *out,
                           size_t cap) {
    int32_t n = strategy_n_results(s), made = 0, eog = 0, stop = 0, budget = 0, empty = 0, pruned = 0;
    forest_id eog_leaf = FOREST_NONE;
    for (int32_t i = 0; i < n; i++) {
        strategy_result r;
        strategy_result_at(s, f, i, &r);
        made += r.n_tokens;
        if (r.end == STRAT_END_EOG) eog++, eog_leaf = r.leaf, empty += r.n_tokens == 0;
        else if (r.end == STRAT_END_STOP) stop++;
        else if (r.end == STRAT_END_PRUNED) pruned++;
        else budget++;
    }
    char end[96], why[192] = "";
    if (eog == 1 && n == 1) eog_name(f, tk, chat, eog_leaf, end, sizeof end);
    else snprintf(end, sizeof end, "end of text");
    const char *names[4] = {"budget", end, "stop string", "pruned"};
    int32_t counts[4] = {budget, eog, stop, pruned}, kinds = (budget > 0) + (eog > 0) + (stop > 0) + (pruned > 0);
    for (int k = 0; k < 4; k++) {
        if (!counts[k]) continue;
        size_t l = strlen(why);
        if (kinds == 1) snprintf(why + l, sizeof why - l, "%s", names[k]);
        else snprintf(why + l, sizeof why - l, "%s%s (%d)", l ? ", " : "", names[k], (int)counts[k]);
    }
    char once[48] = "";
    if (empty) snprintf(once, sizeof once, ", %d ended at once", (int)empty);
    if (chains)
        snprintf(out, cap, "%d of %d chain%s%s, +%d tokens; stopped: %s", (int)(n - empty), (int)n,
                 n == 1 ? "" : "s", once, (int)made, why);
    else
        snprintf(out, cap, "+%d token%s, %d branch%s; stopped: %s", (int)made, made == 1 ? "" : "s", (int)n,
                 n == 1 ? "" : "es", why);
}

/* "2 results, best score -1.23; stopped: budget (1), end of text (1)" */
static void ranked_summary(const strategy *s, const forest *f, char *out, size_t cap) {
    int32_t n = strategy_n_results(s), ended = 0;
    strategy_result best = {0}, r;
    for (int32_t i = 0; i < n; i++) {
        strategy_result_at(s, f, i, &r);
        ended += r.end == STRAT_END_EOG;
        if (i == 0) best = r;
    }
    char why[96];
    if (ended == 0 || ended == n) snprintf(why, sizeof why, "%s", ended ? "end of text" : "budget");
    else snprintf(why, sizeof why, "budget (%d), end of text (%d)", (int)(n - ended), (int)ended);
    if (n == 0) snprintf(out, cap, "no result");
    else snprintf(out, cap, "%d result%s, best score %.2f; stopped: %s", (int)n, n == 1 ? "" : "s", best.score, why);
}

const char *strategy_end_name(strategy_end e) {
    switch (e) {
    case STRAT_END_EOG: return "EOS";
    case STRAT_END_STOP: return "stop";
    case STRAT_END_BUDGET: return "budget";
    case STRAT_END_PRUNED: return "pruned";
    default: return NULL;
    }
}

void strategy_summarize(const strategy *s, const forest *f, const tok *tk, bool chat, char *out, size_t cap,
                        char *note, size_t note_cap) {
    strategy_summary how = strategy_ops_of(s)->summary;
    if (cap) out[0] = '\0';
    if (how == STRAT_SUM_BRANCHES || how == STRAT_SUM_CHAINS)
        branch_summary(s, f, tk, chat, how == STRAT_SUM_CHAINS, out, cap);
    if (how == STRAT_SUM_RANKED) ranked_summary(s, f, out, cap);
    if (how == STRAT_SUM_PROGRESS) {
        strategy_progress pr;
        strategy_get_progress(s, &pr);
        snprintf(note, note_cap, "%s", pr.text);
    }
}
