/* cmd_tools.c - file-producing subcommands: `convert-llama2c` and `mkmodel`. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "convert/llama2c.h"
#include "convert/mkmodel.h"
#include "app.h"

int cmd_convert_llama2c(int argc, char **argv) {
    const char *use = "usage: multidecode convert-llama2c MODEL.bin TOKENIZER.bin OUT.gguf\n\n"
                      "Converts a llama2.c checkpoint (float32) and its tokenizer to GGUF.\n";
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(use, stdout);
        return 0;
    }
    if (argc != 4) {
        fputs(use, stderr);
        return 2;
    }
    st_err err = {0};
    if (llama2c_convert(argv[1], argv[2], argv[3], &err) != ST_OK) return app_fail(&err);
    fprintf(stderr, "wrote %s\n", argv[3]);
    return 0;
}

/* The first line of --help, which a mistyped option prints instead of the whole help. */
#define MKMODEL_USAGE "usage: multidecode mkmodel [options] OUT.gguf"

static void mk_usage(FILE *f) {
    fprintf(f, MKMODEL_USAGE "\n\n"
               "Writes a GGUF with random weights (deterministic from the seed).\n\n"
               "  --arch A           llama (default), qwen2, qwen3, gemma3, gemma4, qwen35,\n"
               "                     qwen35moe, qwen3moe, qwen2moe or gpt-oss\n"
               "  --swa N            gemma3, gemma4, gpt-oss: sliding window in tokens (default: the context)\n"
               "  --swa-pattern P    gemma4: every P-th layer global (default 2)\n"
               "  --head-dim-swa N   gemma4: the local layers' head size (default head-dim / 2)\n"
               "  --kv-shared N      gemma4: the last N layers read earlier layers' KV cache\n"
               "  --ple N            gemma4: per-layer embeddings of width N (default none)\n"
               "  --softcap F        gemma4: final logit soft-capping at F (default none)\n"
               "  --experts N        the MoE archs: experts per layer (default 8)\n"
               "  --experts-used K   the MoE archs: experts a token uses (default 2)\n"
               "  --ffn-exp N        the MoE archs: one expert's width (default: --ffn;\n"
               "                     qwen2moe's and qwen35moe's shared expert has --ffn)\n"
               "  --fused-gate-up    the MoE archs: gate and up experts as one ffn_gate_up_exps\n"
               "  --no-ffn-key       leave feed_forward_length out (the MoE archs read without it)\n"
               "  --attn-every N     qwen35: every N-th layer full attention, the others Gated\n"
               "                     DeltaNet (default 4; qwen35moe too)\n"
               "  --ssm-state N --ssm-k-heads N --ssm-v-heads N --ssm-conv N\n"
               "                     qwen35: the DeltaNet's head size (default head-dim), key and\n"
               "                     value heads (default kv-heads, heads), conv width (default 4)\n"
               "  --rope-scale F     linear RoPE scaling by F (gemma3: the global layers only)\n"
               "  --yarn F           YaRN scaling by F from a context of --ctx / F\n"
               "  --preset NAME      tiny, 25m, 110m or 1b (default tiny); options below override\n"
               "  --type T           weight type: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K,\n"
               "                     Q5_K, Q6_K, Q2_K, Q3_K, IQ4_NL, IQ4_XS, MXFP4 (default F32;\n"
               "                     gpt-oss in MXFP4: the experts, its other matrices Q8_0)\n"
               "  --vocab N --embd N --layers N --heads N --kv-heads N --head-dim N --ffn N\n"
               "  --ctx N            context length\n"
               "  --untied           separate output.weight (default: tied to token_embd)\n"
               "  --seed S           (default 1)\n");
}

int cmd_mkmodel(int argc, char **argv) {
    static const struct option lo[] = {
        {"preset", 1, 0, 'P'}, {"type", 1, 0, 'T'},     {"vocab", 1, 0, 'v'},
        {"embd", 1, 0, 'e'},   {"layers", 1, 0, 'l'},   {"heads", 1, 0, 'H'},
        {"kv-heads", 1, 0, 'k'}, {"head-dim", 1, 0, 'd'}, {"ffn", 1, 0, 'f'},
        {"ctx", 1, 0, 'c'},    {"untied", 0, 0, 'u'},   {"seed", 1, 0, 's'},
        {"arch", 1, 0, 'A'},   {"swa", 1, 0, 'W'},     {"rope-scale", 1, 0, 'R'},
        {"swa-pattern", 1, 0, 'p'}, {"head-dim-swa", 1, 0, 'D'}, {"kv-shared", 1, 0, 'K'},
        {"ple", 1, 0, 'E'},    {"softcap", 1, 0, 'C'},  {"experts", 1, 0, 'X'},
        {"experts-used", 1, 0, 'U'}, {"ffn-exp", 1, 0, 'F'}, {"yarn", 1, 0, 'Y'},
        {"ple", 1, 0, 'E'},    {"softcap", 1, 0, 'C'},
        {"attn-every", 1, 0, 'I'}, {"ssm-state", 1, 0, 'S'}, {"ssm-k-heads", 1, 0, 'G'},
        {"ssm-v-heads", 1, 0, 'V'}, {"ssm-conv", 1, 0, 'N'}, {"fused-gate-up", 0, 0, 'J'},
        {"no-ffn-key", 0, 0, 'O'},
        {"help", 0, 0, 'h'},   {0, 0, 0, 0}};
    mkmodel_params p = mkmodel_default_params();
    /* a preset first, wherever it appears, so that other options override it */
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--preset") && mkmodel_preset(argv[i + 1], &p) != ST_OK)
            return app_usage_error("unknown preset '%s' (tiny, 25m, 110m, 1b)", argv[i + 1]);
    int ch;
    int64_t v;
    while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        int32_t *dst = NULL;
        switch (ch) {
        case 'P': continue;
        case 'A': p.arch = optarg; continue;
        case 'J': p.fused_gate_up = true; continue;
        case 'O': p.no_ff_key = true; continue;
        case 'W': dst = &p.n_swa; break;
        case 'p': dst = &p.swa_pattern; break;
        case 'D': dst = &p.head_dim_swa; break;
        case 'K': dst = &p.n_kv_shared; break;
        case 'E': dst = &p.n_embd_ple; break;
        case 'X': dst = &p.n_expert; break;
        case 'U': dst = &p.n_expert_used; break;
        case 'F': dst = &p.n_ff_exp; break;
        case 'I': dst = &p.full_attn_interval; break;
        case 'S': dst = &p.ssm_state; break;
        case 'G': dst = &p.ssm_k_heads; break;
        case 'V': dst = &p.ssm_v_heads; break;
        case 'N': dst = &p.ssm_conv; break;
        case 'C': {
            double f;
            if (app_parse_float(optarg, &f) || f <= 0 || f > 1e4)
                return app_usage_error("bad --softcap '%s' (want a cap above 0, up to 1e4)", optarg);
            p.softcap = (float)f;
            continue;
        }
        case 'R':
        case 'Y': {
            double f;
            if (app_parse_float(optarg, &f) || f < 1 || f > 1e6)
                return app_usage_error("bad --%s '%s' (want a factor from 1 to 1e6)",
                                       ch == 'R' ? "rope-scale" : "yarn", optarg);
            *(ch == 'R' ? &p.rope_scale : &p.yarn) = (float)f;
            continue;
        }
        case 'T': {
            int32_t t = dtype_from_name(optarg);
            if (t < 0) return app_usage_error("unknown type '%s'", optarg);
            p.wtype = (uint32_t)t;
            continue;
        }
        case 'v': dst = &p.n_vocab; break;
        case 'e': dst = &p.n_embd; break;
        case 'l': dst = &p.n_layer; break;
        case 'H': dst = &p.n_head; break;
        case 'k': dst = &p.n_head_kv; break;
        case 'd': dst = &p.head_dim; break;
        case 'f': dst = &p.n_ff; break;
        case 'c': dst = &p.n_ctx; break;
        case 'u': p.tied = false; continue;
        case 's':
            if (app_opt_u64("--seed", optarg, &p.seed)) return 2;
            continue;
        case 'h': mk_usage(stdout); return 0;
        default: return app_usage_error("%s; see multidecode mkmodel --help", MKMODEL_USAGE);
        }
        if (app_opt_int("value", optarg, 1, 1 << 24, &v)) return 2;
        *dst = (int32_t)v;
    }
    if (optind != argc - 1) return app_usage_error("mkmodel needs exactly one OUT.gguf argument");
    st_err err = {0};
    if (mkmodel_write(&p, argv[optind], &err) != ST_OK) return app_fail(&err);
    return 0;
}
