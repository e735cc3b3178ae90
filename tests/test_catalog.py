"""The knowledge catalog: the MoE entries, sources beside every field, the validators of the new schema, the latency
targets, and the figures the derivation adds from them (in-node TP, latency demand, a corpus's prefill share)."""
from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from kentino_expert.domain import architecture
from kentino_expert.domain.catalog import load_knowledge
from kentino_expert.domain.derive import derive
from kentino_expert.domain.workload import validate_facts
from kentino_expert.errors import KnowledgeError
from kentino_expert.expert import Expert

ROOT = Path(__file__).resolve().parent.parent
K = load_knowledge(ROOT / "knowledge")
MOE_IDS = ("llama-4-scout", "llama-4-maverick", "qwen3-235b-a22b", "qwen3-30b-a3b", "gpt-oss-120b", "gpt-oss-20b",
           "deepseek-r1", "deepseek-v3.1", "kimi-k2")
UNSOURCED = {"id", "name", "aliases", "source", "sources", "estimated"}


class TestCatalog:
    """The catalog's entries and their sources."""

    @pytest.mark.parametrize("model_id", MOE_IDS)
    def test_moe_entry_is_mixture_of_experts(self, model_id):
        """Each new MoE model has its expert layout and fewer active than total parameters."""
        model = K.model(model_id)
        assert model.moe is not None and model.active_b < model.params_b

    @pytest.mark.parametrize("alias,model_id", [
        ("qwen3-235b", "qwen3-235b-a22b"), ("openai/gpt-oss-120b", "gpt-oss-120b"),
        ("kimi-k2-instruct", "kimi-k2"), ("llama4-scout", "llama-4-scout")])
    def test_aliases(self, alias, model_id):
        """Aliases resolve to the catalog id, in any case."""
        assert K.model(alias.upper()).id == model_id

    @pytest.mark.parametrize("written,model_id", [
        ("Llama 3.1 70B", "llama-3.1-70b"), ("qwen3 235b", "qwen3-235b-a22b"), ("Qwen2.5 32B", "qwen2.5-32b"),
        ("meta-llama/Meta-Llama-3.1-8B-Instruct", "llama-3.1-8b"), ("Qwen/Qwen2.5-72B-Instruct", "qwen2.5-72b"),
        ("DeepSeek R1", "deepseek-r1"), ("gpt_oss_120b", "gpt-oss-120b")])
    def test_names_as_people_write_them(self, written, model_id):
        """A model written with spaces, a repository owner, a vendor prefix or an -Instruct suffix is its catalog
        entry (issue 27 item 6: the ask text's own example, "Llama 3.1 70B", was an unknown model)."""
        assert K.model(written).id == model_id

    def test_cards_as_people_write_them(self):
        """A card written as its data sheet names it is the catalog's card."""
        assert K.gpu("RTX PRO 6000").id == "rtx-pro-6000" and K.gpu("rtx 5090").id == "rtx-5090"

    @pytest.mark.parametrize("written", ["llama", "70b", "Llama 3.1", "Llama 3.1 7B"])
    def test_a_loose_name_of_no_single_entry_is_unknown(self, written):
        """A loose name that fits no entry, or is a prefix of several, stays an unknown model with a suggestion."""
        with pytest.raises(Exception, match="unknown model"):
            K.model(written)

    @pytest.mark.parametrize("model_id", sorted(K.models))
    def test_every_field_set_has_a_source(self, model_id):
        """Every field an entry sets is named by one of its `sources` keys, or the entry's `source` covers it all
        (the entries that have no `sources`)."""
        model = K.model(model_id)
        covered = {name.strip() for key in model.sources for name in key.split(",")}
        base = {"params_b", "active_params_b", "layers", "hidden", "attention_heads", "kv_heads", "head_dim",
                "max_context"}  # the main `source` (config.json and model card) of every entry
        named = model.model_fields_set - UNSOURCED - base
        assert named <= covered | ({"local_attention", "mla", "moe"} if not model.sources else set()), named - covered

    def test_mla_models_carry_their_projection_ranks(self):
        """DeepSeek and Kimi keep a 512 + 64 latent and a 1,536 query rank (the LoRA count needs them)."""
        for model_id in ("deepseek-v3", "deepseek-r1", "deepseek-v3.1", "kimi-k2"):
            mla = K.model(model_id).mla
            assert (mla.kv_lora_rank, mla.qk_rope_head_dim, mla.q_lora_rank) == (512, 64, 1536)

    def test_gpt_oss_routed_experts_are_most_of_it(self):
        """gpt-oss-120b's routed experts are 114.7B of its 116.8B (its MXFP4 part)."""
        model = K.model("gpt-oss-120b")
        assert architecture.routed_expert_params(model) == pytest.approx(114.65e9, rel=0.01)

    def test_largest_module_is_the_embedding(self):
        """The biggest module ZeRO-3 gathers is the 128,256 x 16,384 embedding of Llama 3.1 405B (2.1B)."""
        assert architecture.largest_module_params(K.model("llama-3.1-405b")) == 128256 * 16384


def copy_knowledge(tmp_path: Path) -> Path:
    target = tmp_path / "knowledge"
    shutil.copytree(ROOT / "knowledge", target)
    return target


class TestValidation:
    """A broken catalog or latency file is a located KnowledgeError."""

    def test_more_moe_layers_than_layers(self, tmp_path):
        """moe_layers above layers is refused with the entry's index."""
        root = copy_knowledge(tmp_path)
        path = root / "models.yaml"
        path.write_text(path.read_text().replace("expert_intermediate_size: 2048, moe_layers: 58}",
                                                 "expert_intermediate_size: 2048, moe_layers: 99}", 1))
        with pytest.raises(KnowledgeError, match=r"models\[11\]: moe.moe_layers \(99\) is more than layers"):
            load_knowledge(root)

    def test_sources_key_must_name_fields(self, tmp_path):
        """A `sources` key naming no field of a model is refused (a typo would leave a number unsourced)."""
        root = copy_knowledge(tmp_path)
        path = root / "models.yaml"
        original = "      vocab_size, tie_word_embeddings, intermediate_size: \"config"
        path.write_text(path.read_text().replace(original, original.replace("vocab_size", "vocab_sise"), 1))
        with pytest.raises(KnowledgeError, match="sources: 'vocab_sise' is not a field of a model"):
            load_knowledge(root)

    def test_node_shape_a_buyer_cannot_name(self, tmp_path):
        """A node shape beyond the gpus_per_node a caller may give is refused at the card's entry: the build
        search would otherwise drop the card without a word."""
        root = copy_knowledge(tmp_path)
        path = root / "gpus.yaml"
        path.write_text(path.read_text().replace("node_shapes: [8]", "node_shapes: [8, 32]", 1))
        with pytest.raises(KnowledgeError, match=r"gpus\[0\]: node_shapes: 32 GPUs per node is not a gpus_per_node "
                                                 r"a buyer can give \(Input should be less than or equal to 16\)") \
                as caught:
            load_knowledge(root)
        assert caught.value.location.file.endswith("gpus.yaml") and caught.value.location.line > 1

    def test_an_id_a_caller_cannot_reach(self, tmp_path):
        """An id with capitals is refused at its entry: lookups lowercase the name a caller gives, so the model
        would never be found."""
        root = copy_knowledge(tmp_path)
        path = root / "links.yaml"
        text = path.read_text()
        first_id = next(line.split("id:", 1)[1].strip() for line in text.splitlines() if "- id:" in line)
        path.write_text(text.replace(f"id: {first_id}", f"id: {first_id.upper()}", 1))
        with pytest.raises(KnowledgeError, match=rf"links\[0\]: '{first_id.upper()}' is not a name a caller can "
                                                 rf"reach: .*\(write '{first_id}'\)") as caught:
            load_knowledge(root)
        assert caught.value.location.file.endswith("links.yaml") and caught.value.location.line > 1

    def test_an_alias_that_names_another_entry(self, tmp_path):
        """An alias equal to another entry's id is refused: a lookup would find only one of the two."""
        root = copy_knowledge(tmp_path)
        path = root / "gpus.yaml"
        text = path.read_text()
        ids = [line.split("id:", 1)[1].strip() for line in text.splitlines() if line.lstrip().startswith("- id:")]
        last_entry = text.rindex("- id:")
        path.write_text(text[:last_entry] + text[last_entry:].replace("\n", f"\n    aliases: [{ids[0]}]\n", 1))
        with pytest.raises(KnowledgeError, match=rf"gpus\[{len(ids) - 1}\]: '{ids[0]}' already names '{ids[0]}'"):
            load_knowledge(root)

    @pytest.mark.parametrize("filename, field", [("gpus.yaml", "memory_gb"), ("models.yaml", "params_b"),
                                                 ("links.yaml", "bandwidth_gbs")])
    def test_an_infinite_number_is_refused_at_its_entry(self, tmp_path, filename, field):
        """`.inf` for a positive number is refused where it is written, not met as zeros and infinities in every
        rule example's sizing."""
        root = copy_knowledge(tmp_path)
        path = root / filename
        text = path.read_text()
        line = next(line for line in text.splitlines() if line.strip().startswith(f"{field}:"))
        path.write_text(text.replace(line, f"{line.split(':')[0]}: .inf", 1))
        with pytest.raises(KnowledgeError, match=rf"{field}: Input should be a finite number") as caught:
            load_knowledge(root)
        assert caught.value.location.file.endswith(filename)

    def test_a_heuristic_id_given_twice_is_refused(self, tmp_path):
        """A second entry with the same heuristic id is refused at its line (it used to replace the first's text)."""
        root = copy_knowledge(tmp_path)
        path = root / "heuristics.yaml"
        path.write_text(path.read_text() + "- id: H-FIT-CAPACITY\n  section: x\n  text: duplicate\n")
        with pytest.raises(KnowledgeError, match="duplicate heuristic id 'H-FIT-CAPACITY'") as caught:
            load_knowledge(root)
        assert caught.value.location.line > 1

    def test_latency_class_must_exist(self, tmp_path):
        """A target for an unknown latency class is refused at its line."""
        root = copy_knowledge(tmp_path)
        path = root / "latency.yaml"
        path.write_text(path.read_text().replace("  production: 5 ", "  productoin: 5 "))
        with pytest.raises(KnowledgeError, match="unknown latency class 'productoin'") as caught:
            load_knowledge(root)
        assert caught.value.location.line > 1

    def test_latency_target_must_be_positive(self, tmp_path):
        """A zero target is refused."""
        root = copy_knowledge(tmp_path)
        path = root / "latency.yaml"
        path.write_text(path.read_text().replace("  interactive: 25 ", "  interactive: 0 "))
        with pytest.raises(KnowledgeError, match="per_user_tokens_per_s.interactive: expected a positive number"):
            load_knowledge(root)


EXPERT = Expert()


def figures_of(facts: dict) -> dict:
    ruleset = EXPERT.ruleset
    derived = derive(validate_facts(facts), EXPERT.knowledge, ruleset.fact_policies, ruleset.parameter_values)
    return {name: figure.value for name, figure in derived.figures.items()}


class TestDerivedFigures:
    """What the derivation computes from the new facts and catalog fields."""

    def test_latency_target_becomes_a_demand(self):
        """256 interactive users at 25 tokens/s each demand 6,400 tokens/s; the replicas are the nodes that hold
        256 requests at the count one node keeps within the targets, each user then at 25 tokens/s or more."""
        figures = figures_of({"task": "inference", "model": "llama-3.1-70b", "concurrency": 256,
                              "latency": "interactive"})
        assert figures["latency_target_tokens_per_s"] == 25
        assert figures["latency_demand_tokens_per_s"] == 6400 == figures["demand_tokens_per_s"]
        per_node = figures["requests_in_target_per_node_fp8"]
        assert figures["replicas_needed_fp8"] == math.ceil(256 / per_node) > 1
        assert figures["decode_ceiling_tokens_per_s_fp8"] >= 25

    def test_offline_has_no_per_user_target(self):
        """Offline batch work has no per-user decode target, so no latency demand."""
        figures = figures_of({"task": "batch-inference", "model": "llama-3.1-70b"})
        assert "latency_target_tokens_per_s" not in figures and "latency_demand_tokens_per_s" not in figures

    def test_generated_share_blends_the_corpus_rate(self):
        """A corpus 10% generated runs at 1 / (0.1 / decode + 0.9 / prefill) tokens/s per node, so one node carries
        1B tokens in 2 days where a generated corpus needs more."""
        facts = {"task": "batch-inference", "model": "llama-3.1-70b", "corpus_tokens": "1B", "deadline_days": 2}
        generated = figures_of(facts)
        mixed = figures_of({**facts, "generated_share": 0.1})
        decode, prefill = generated["node_tokens_per_s_fp8"], mixed["node_prefill_tokens_per_s_fp8"]
        assert prefill > 5 * decode
        assert mixed["node_tokens_per_s_fp8"] == pytest.approx(1 / (0.1 / decode + 0.9 / prefill), rel=1e-5)
        rate = 1e9 / (2 * 86400)
        assert generated["replicas_needed_fp8"] == math.ceil(rate / decode) > 1
        assert mixed["replicas_needed_fp8"] == 1

    def test_an_moe_decodes_one_user_on_its_active_parameters_and_a_batch_on_most_experts(self):
        """Qwen3-235B-A22B (22B active) serves one user faster than a dense 70B on the same node, but a batch of
        128 touches most of its 128 experts (E(1-(1-8/128)^b)), so its node does not reach 70.6 / 22 times the
        dense model's throughput."""
        moe = figures_of({"task": "inference", "model": "qwen3-235b-a22b", "latency": "production"})
        dense = figures_of({"task": "inference", "model": "llama-3.1-70b", "latency": "production"})
        assert moe["single_user_tokens_per_s_fp8"] > 1.5 * dense["single_user_tokens_per_s_fp8"]
        assert moe["node_tokens_per_s_fp8"] < 70.6 / 22 * dense["node_tokens_per_s_fp8"]

    def test_training_figures_name_the_sharding(self):
        """70B LoRA shards its BF16 base (fsdp); 8B LoRA keeps it whole on every GPU (none)."""
        assert figures_of({"task": "lora", "model": "llama-3.1-70b"})["training_sharding"] == "fsdp"
        assert figures_of({"task": "lora", "model": "llama-3.1-8b"})["training_sharding"] == "none"
