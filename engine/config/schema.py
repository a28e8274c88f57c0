"""The keys each file kind may hold, for unknown-key diagnostics with a "did you mean".

A `Section` lists the keys this project reads (`read`), keys that belong to the trainer or HyperParallel and
are accepted untouched (`known`), its sub-sections, and whether it is `open` (the trainer accepts many more
keys than anyone can list: only a near miss of a listed key is reported there, as a likely typo) or closed
(a search config's sections: every unknown key is reported). Sources: docs/formats.md §1-§2 and the recipes and
loaders of [HP] §2.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.catalog.models import MODEL_FIELDS, VISION_KEYS

# Boolean run flags stated as Megatron-style options (engine.specs.RunOptions fields of the same names: overlaps,
# fusions, the attention swap, forced MoE balance): hp-lsp extensions, not HyperParallel's. A train.yaml states them
# under `accelerator`, a search config at its top level; an AutoModels trainer refuses them (SEARCH_ONLY_KEYS).
OVERLAP_KEYS = ("tp_comm_overlap", "overlap_grad_reduce", "overlap_param_gather", "moe_shared_expert_overlap",
                "moe_a2a_overlap", "gradient_accumulation_fusion", "gemm_gradient_accumulation_fusion",
                "swap_attention", "moe_router_force_load_balancing")
# The pipeline layout keys engine.config.stated_layout reads (Megatron-Core's and HyperParallel's names).
LAYOUT_KEY_NAMES = ("account_for_embedding_in_pipeline_split account_for_loss_in_pipeline_split "
                    "num_layers_in_first_pipeline_stage num_layers_in_last_pipeline_stage "
                    "decoder_first_pipeline_num_layers decoder_last_pipeline_num_layers offset emb_out_in_offset "
                    "mtp_in_offset pipeline_model_parallel_layout noop_layers")


@dataclass(frozen=True, slots=True)
class Section:
    read: frozenset[str] = frozenset()
    known: frozenset[str] = frozenset()
    children: dict[str, Section] = field(default_factory=dict)
    open: bool = True


def _s(read: str = "", known: str = "", children: dict[str, Section] | None = None, *, open: bool = True) -> Section:
    return Section(frozenset(read.split()), frozenset(known.split()), children or {}, open)


# HF config keys that are model facts but not priced (rope, norms, ...): accepted without a typo report.
_HF_EXTRA = (
    "rope_theta rope_scaling rms_norm_eps layer_norm_eps layer_norm_epsilon initializer_range model_type "
    "architectures torch_dtype bos_token_id eos_token_id pad_token_id attention_bias "
    "mlp_bias use_cache sliding_window use_sliding_window max_window_layers norm_topk_prob router_aux_loss_coef "
    "output_router_logits decoder_sparse_step mlp_only_layers routed_scaling_factor "
    "scoring_func topk_method moe_layer_freq aux_loss_alpha seq_aux ep_size multiple_of ffn_dim_multiplier "
    "offset full_rec sel_rec use_gmm seq_length param_init_type softmax_compute_type compute_dtype "
    "local_batch_size moe_enabled use_seq_parallel optimizer_weight_shard_size enable_parallel_optimizer "
    "recompute_slice_activation attn_output_gate layer_types name arch ops layers vision visual_seq_len "
    "device_num num_local_experts n_routed_experts n_shared_experts num_nextn_predict_layers "
    "mtp_num_hidden_layers n_layer n_head n_embd text_config vision_config quantization_config"
)

# A vision tower's section (engine.config.vision): the keys read, and the rest of a Hugging Face vision_config.
_VISION = _s(" ".join(sorted(VISION_KEYS)),
             "model_type in_channels in_chans temporal_patch_size window_size fullatt_block_indexes tokens_per_second "
             "deepstack_visual_indexes initializer_range layer_norm_eps hidden_dropout_prob attention_dropout mlp_ratio "
             "num_channels image_size projection_dim torch_dtype")
TRAIN_AUTOMODELS = _s(
    "model_init_dtype", "optimizer lr_scheduler activation_swap checkpoint logging seed "
    "trainer output_dir resume wandb profiler data tokenizer loss evaluation callbacks",
    {
        "mixed_precision": _s("enabled param_dtype reduce_dtype", "output_dtype buffer_dtype cast_forward_inputs"),
        "model": _s(
            "name pretrained_model_name_or_path config_path torch_dtype " + " ".join(MODEL_FIELDS),
            "_target_ attn_implementation cache_dir local_files_only revision subfolder token trust_remote_code "
            "param_init_type compute_dtype softmax_compute_type",
            {"config_overrides": _s(" ".join(MODEL_FIELDS), _HF_EXTRA, {"vision": _VISION}), "vision": _VISION},
        ),
        "training": _s(
            "global_batch_size micro_batch_size micro_batch_num",
            "train_iters max_grad_norm max_steps seed log_interval save_interval eval_interval lr learning_rate "
            "weight_decay warmup_steps gradient_accumulation_steps",
        ),
        "accelerator": _s(
            "tp_size pp_size cp_size ep_size expert_tensor_parallel_degree sequence_parallel pp_interleave_num "
            "pipeline_scheduler context_parallel_algo optimizer_weight_shard_size pp_schedule pp_vpp "
            "pp_micro_batch_num enable_parallel_optimizer loss_parallel " + " ".join(OVERLAP_KEYS) + " "
            + LAYOUT_KEY_NAMES,
            "etp_size dp_size dp_replicate_size",
        ),
        "fsdp_config": _s(
            "dp_shard_size reshard_after_forward",
            "edp_shard_size replicate_params reshard_after_backward requires_grad_sync forward_prefetch_depth "
            "backward_prefetch_depth comm_fusion mixed_precision param_dtype reduce_dtype",
        ),
        "activation_checkpoint": _s("mode selective_policy recompute_modules layers", "layer_ids"),
        "dataset": _s("", "_target_ data_config path name num_workers", {
            "data_transform": _s("max_seq_len", "_target_ tokenizer padding"),
        }),
        "context": _s("device_num max_device_memory", "expert_shard visual_seq_len mode device_target"),
    },
)

TRAIN_LEGACY = _s(
    "", "optimizer lr_scheduler checkpoint logging seed output_dir",
    {
        "model": _s("name", "", {"config_overrides": _s(" ".join(MODEL_FIELDS), _HF_EXTRA, {"vision": _VISION})}),
        "train": _s(
            "global_batch_size micro_batch_size micro_batch_num",
            "optimizer train_iters max_grad_norm lr seed",
            {
                "mixed_precision": _s("enabled param_dtype reduce_dtype", "output_dtype buffer_dtype cast_forward_inputs"),
                "accelerator": _s(
                    "dp_shard dp_replicate tp_degree pipeline_parallel_degree context_parallel_degree "
                    "expert_parallel_degree expert_tensor_parallel_degree use_seq_parallel "
                    "enable_parallel_optimizer optimizer_weight_shard_size sequence_parallel", "",
                ),
                "gradient_checkpointing": _s("activation_checkpoint", ""),
            },
        ),
        "data": _s("max_seq_len", "path tokenizer num_workers"),
        "context": _s("device_num max_device_memory", "expert_shard visual_seq_len mode device_target"),
    },
)

SEARCH_DIMENSION_KEYS = (
    "dp fsdp tp pp cp ep etp vpp micro_batch_size micro_batch_num sequence_parallel"
)

SEARCH = _s(
    "train_yaml recompute recompute_modes recompute_modules offload selective_policy cpu_offloading_num_layers "
    + " ".join(OVERLAP_KEYS),
    "",
    {
        # HyperParallel's own section; `type`, `recompute_strategy`, `enable_profiling_calibration` are what its
        # loader writes there ([HP] §2.1): accepted. Open: other tools' keys are theirs.
        "estimator": _s("cp_algo recompute_modes ratios_file",
                        "type recompute_strategy enable_profiling_calibration framework framework_version compile fp8 "
                        "moe_dispatcher grad_dtype optimizer_state_dtype master_weights fp8_recipe fp8_param_gather "
                        "loss_chunks"),
        "model": _s(
            " ".join(MODEL_FIELDS) + " name local_batch_size compute_dtype torch_dtype use_seq_parallel "
            "optimizer_weight_shard_size seq_length seq_len max_seq_len offset",
            _HF_EXTRA + " _target_", {"vision": _VISION},
        ),
        "cluster": _s(
            "num_nodes cards_per_node device_type device_memory_gb intra_node_bandwidth_gb_s "
            "inter_node_bandwidth_gb_s", "intra_node_bandwidth_gbps inter_node_bandwidth_gbps", open=False,
        ),
        "parallelism": _s(SEARCH_DIMENSION_KEYS + " recompute", "", open=False),
        "constraint": _s("global_batch_size memory_limit_gb", "", open=False),
        "pp_config": _s(
            "pipeline_schedule pp_interleave_num pp_degree " + LAYOUT_KEY_NAMES,
            "stage_partition_mode stage_partition layer_offset_range layer_recompute_layers micro_batch_num",
            open=False,
        ),
    },
    open=False,
)


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# The AutoModels trainer's strict resolver ([HP] Corrections, "The AutoModels trainer is strict"): the root fields
# and the fields of the dataclass sections it checks, as the union over its builds (the pipeline keys are in the
# builds that pipeline; `dry_run` and `codegen` in some builds). Anything else there the trainer refuses with
# "unknown configuration fields: [...]". `_target_` sections are checked against their callable instead.
TRAINER_ROOT_FIELDS = _words(
    "model optimizer lr_scheduler loss_fn flops_estimator model_init_dtype training accelerator fsdp_config "
    "plan_overrides mixed_precision activation_checkpoint activation_swap compile dataset dataloader "
    "packed_sequence checkpoint debug model_integration wandb profiling magi peft dry_run codegen")
TRAINER_SECTION_FIELDS: dict[str, frozenset[str]] = {
    "accelerator": _words("tp_size cp_size ep_size pp_size sequence_parallel loss_parallel pp_micro_batch_num "
                          "pp_schedule pp_vpp pp_layer_split"),
    "fsdp_config": _words("dp_shard_size edp_shard_size replicate_params mix_precision enable_offload "
                          "reshard_after_forward reshard_after_backward requires_grad_sync forward_prefetch_depth "
                          "backward_prefetch_depth comm_fusion comm_fusion_zero_copy"),
    "activation_checkpoint": _words("mode swap_inputs layer_ranges"),
}
# Keys only the search (HyperParallel's, or hp-plan's extensions) reads in a train.yaml: the trainer refuses them.
SEARCH_ONLY_KEYS: dict[str, frozenset[str]] = {
    "": frozenset({"context"}),
    "accelerator": _words(
        "context_parallel_algo pipeline_scheduler pp_interleave_num dp_replicate expert_tensor_parallel_degree "
        "optimizer_weight_shard_size enable_parallel_optimizer fp8 " + " ".join(OVERLAP_KEYS) + " "
        + LAYOUT_KEY_NAMES),
    "training": frozenset({"micro_batch_num"}),
    "activation_checkpoint": _words("layers recompute_slice_activation selective_policy recompute_modules"),
}


def _all_keys(section: Section) -> frozenset[str]:
    out = set(section.read | section.known)
    for name, child in section.children.items():
        out |= {name} | _all_keys(child)
    return frozenset(out)


# Every key some section of some dialect holds: never a typo of another one (engine.validate.trainer).
KNOWN_ANYWHERE = (_all_keys(TRAIN_AUTOMODELS) | _all_keys(TRAIN_LEGACY) | TRAINER_ROOT_FIELDS
                  | frozenset().union(*TRAINER_SECTION_FIELDS.values()))
