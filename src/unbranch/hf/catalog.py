"""Known rewrites of transformers code, as data: which functions, with which hooks.

Keys are modeling modules; values map a function's qualname in that module to the hooks
its rewrite needs (usually none: discovery would find most of these, the catalogue makes
them explicit, reviewable in rewrites/, and covers what a scan cannot see, such as LED's
``is_global_attn``, a tensor turned into a Python bool in one method and tested in another).
Users add their own entries with :func:`register`. Where transformers copies the same code into
many models, a :class:`Recipe` gives it once, picking the classes by their source. A hook that
no longer finds the code it edits makes its entry stale: left out with a warning, never silent.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
import sys
import warnings
from pathlib import Path
from typing import NamedTuple

from ..errors import UnbranchError
from ..exporting import discovery
from . import hooks

_M = "transformers.models."
_ROUTER_CAST = hooks.cast_linear_in_graph("self.classifier", "self.dtype")
# `for e in <experts .nonzero() hit>` has a data-dependent trip count; visiting every expert gives
# the same sum, an expert without tokens adding nothing
_EVERY_EXPERT = hooks.replace_loop_iterable("expert_hit", "[[e] for e in range(self.num_experts)]")
CATALOGUE: dict[str, dict[str, dict]] = {
    _M + "bart.modeling_bart": {"BartEncoderLayer.forward": {}},
    _M + "plbart.modeling_plbart": {"PLBartEncoderLayer.forward": {}},
    _M + "marian.modeling_marian": {"MarianEncoderLayer.forward": {}},
    _M + "mvp.modeling_mvp": {"MvpEncoderLayer.forward": {}},
    _M + "blenderbot_small.modeling_blenderbot_small": {"BlenderbotSmallEncoderLayer.forward": {}},
    _M + "bigbird_pegasus.modeling_bigbird_pegasus": {"BigBirdPegasusEncoderLayer.forward": {}},
    _M + "led.modeling_led": {
        "LEDEncoderLayer.forward": {},
        # (LED's own `_pad_to_window_size` specialises the export on seq_len % attention_window,
        # with or without unbranch: its padding `if` returns None for inputs_embeds)
        # `is_global_attn = (attention_mask > 0).any().item()` is a data-dependent bool that
        # LEDEncoderSelfAttention branches on; only a global_attention_mask can make it True,
        # so without one it is statically False and the global-attention path (whose shapes
        # depend on data) is not traced at all
        "LEDEncoder.forward": {
            "pre_rewriter": hooks.guard_assignment("is_global_attn", "global_attention_mask is not None")
        },
    },
    _M + "nllb_moe.modeling_nllb_moe": {
        "NllbMoeEncoderLayer.forward": {},
        "NllbMoeDecoderLayer.forward": {},
        "NllbMoeExperts.forward": {"pre_rewriter": _EVERY_EXPERT},
        # re-assigning a submodule inside forward cannot be traced: the classifier's float32 cast
        # is made eagerly, and in the graph under export (its weights cast where they are read)
        "NllbMoeTop2Router._cast_classifier": {"pre_rewriter": _ROUTER_CAST},
        "NllbMoeTop2Router.forward": {"pre_rewriter": _ROUTER_CAST},
    },
    _M + "switch_transformers.modeling_switch_transformers": {
        # NllbMoe's classifier cast, in the router's forward
        "SwitchTransformersTop1Router.forward": {"pre_rewriter": _ROUTER_CAST},
        # and NllbMoe's loop over the experts hit
        "SwitchTransformersExperts.forward": {"pre_rewriter": _EVERY_EXPERT},
    },
    # the same loop over the experts `.nonzero()` hit, in MoE layers with no batched experts implementation
    _M + "openai_privacy_filter.modeling_openai_privacy_filter": {
        "OpenAIPrivacyFilterExperts.forward": {"pre_rewriter": _EVERY_EXPERT},
    },
    _M + "longcat_flash.modeling_longcat_flash": {
        # every expert (routed and identity ones), its index a Python int; an expert without
        # tokens adds nothing, so its early `continue` (on a data-dependent size) can go
        "LongcatFlashExperts.forward": {
            "pre_rewriter": hooks.chain(
                hooks.replace_loop_iterable("expert_hit", "range(self.total_experts)"),
                hooks.replace_value("expert_idx", "expert_idx_tensor"),
                hooks.drop_if("token_idx.numel() == 0"),
            )
        },
    },
    # the same float16 clamp in the time-series models' encoder layers
    _M + "autoformer.modeling_autoformer": {"AutoformerEncoderLayer.forward": {}},
    _M + "informer.modeling_informer": {"InformerEncoderLayer.forward": {}},
    _M + "time_series_transformer.modeling_time_series_transformer": {"TimeSeriesTransformerEncoderLayer.forward": {}},
    # known, nothing to rewrite: ViT's one branch (ViTEmbeddings.interpolate_pos_encoding, native
    # size or not) tests sizes only, which the plain export handles (tests/test_dropin.py)
    _M + "vit.modeling_vit": {},
    _M + "longt5.modeling_longt5": {"LongT5Block.forward": {}},
    _M + "fsmt.modeling_fsmt": {
        # `if not mask.any(): mask = None`: no cond can return None, and an all-False mask masks nothing
        "make_padding_mask": {"pre_rewriter": hooks.drop_none_fallback},
    },
}


def register(module: str, qualname: str, **hooks) -> None:
    """Add (or replace) the rewrite of ``module:qualname``, with optional hooks."""
    CATALOGUE.setdefault(module, {})[qualname] = hooks


# audio codecs keep their convolutions' sizes in tensor buffers (kernel, stride, padding), so the
# padding computed from them is data; the wrapped Conv1d holds the same sizes as Python ints
_KERNEL = "((self.conv.kernel_size[0] - 1) * self.conv.dilation[0] + 1)"
_PADDING = f"({_KERNEL} - self.conv.stride[0])"
_CONV_SIZES_HOOK = hooks.replace_expressions(
    {
        "self.kernel_size": _KERNEL,
        "self.stride": "self.conv.stride[0]",
        "self.padding_total": _PADDING,
        "self.padding_right": f"({_PADDING} // 2)",
        "self.padding_left": f"({_PADDING} - {_PADDING} // 2)",
        "torch.ceil(n_frames).to(torch.int64)": "math.ceil(n_frames)",
    }
)
for _family, _conv in [
    ("encodec", "EncodecConv1d"),
    ("mimi", "MimiConv1d"),
    ("pocket_tts_audio_tokenizer", "PocketTTSAudioTokenizerConv1d"),
]:
    for _method in ("_get_extra_padding_for_conv1d", "forward"):
        register(f"{_M}{_family}.modeling_{_family}", f"{_conv}.{_method}", pre_rewriter=_CONV_SIZES_HOOK)
# and Encodec's chunk loop: under export, one chunk (the whole waveform) when the config has no
# chunk length, as `range(0, n, n)` gives, without making export specialise the length n
_ONE_CHUNK = "self.config.chunk_length is not None or not torch.compiler.is_compiling()"
register(
    _M + "encodec.modeling_encodec",
    "EncodecModel.encode",
    pre_rewriter=hooks.replace_expressions(
        {"range(0, input_length, stride)": f"(range(0, input_length, stride) if {_ONE_CHUNK} else [0])"}
    ),
)


# relative position encodings cached up to 5,000 positions: whether the cache is long enough is
# a test on the output length, which is data (the predicted durations); under export they are
# computed for the length needed, the values the cache holds
register(
    _M + "fastspeech2_conformer.modeling_fastspeech2_conformer",
    "FastSpeech2ConformerRelPositionalEncoding.extend_pos_enc",
    pre_rewriter=hooks.replace_expressions(
        {"pos_enc is not None": "pos_enc is not None and not torch.compiler.is_compiling()"}
    ),
)


class Recipe(NamedTuple):
    """One semantic rewrite for every class whose method shows the same code, wherever it is defined.

    Where transformers copies one piece of code into many models, a recipe names it once: the
    ``method`` of every class whose source ``trigger`` matches gets ``hooks``, in any module.
    A class the trigger picks but a hook cannot change is a stale entry, as a catalogued one is.
    """

    name: str
    method: str
    trigger: re.Pattern
    hooks: dict


RECIPES = [
    # attention split per image at data-dependent lengths (`torch.split(t, lengths.tolist())`): one
    # block-diagonally masked attention under export. Vision (and audio) attention of the Qwen-VL and
    # GLM-V families and their copies (28 classes in transformers 5.23); the loop-and-append form
    # (Cosmos3Edge, Radio...) is another shape of code.
    Recipe(
        "block_diagonal_attention",
        "forward",
        # the chunk lengths read from data, one attention per chunk in a list comprehension, concatenated
        re.compile(
            r"\blengths\.tolist\(\)(?s:.*?)\battn_outputs = \[(?s:.*?)\bin zip\(\*splits\)\s*\]"
            r"(?s:.*?)\btorch\.cat\(attn_outputs\b"
        ),
        {"pre_rewriter": hooks.block_diagonal_attention},
    ),
]
# module -> the entries recipes add for its classes (qualname -> hooks)
_RECIPE_ENTRIES: dict[str, dict[str, dict]] = {}


def _text(obj) -> str:
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        return ""


def recipe_entries(module_name: str) -> dict[str, dict]:
    """``{qualname: hooks}`` for the classes of ``module_name`` a recipe picks (read once per module)."""
    if module_name not in _RECIPE_ENTRIES:
        found = {}
        module = sys.modules.get(module_name)
        if module is not None and not module_name.startswith("torch.") and module_name != "builtins":
            text = _text(module)
            for recipe in (r for r in RECIPES if r.trigger.search(text)):
                for cls in vars(module).values():
                    method = cls.__dict__.get(recipe.method) if isinstance(cls, type) else None
                    if method and cls.__module__ == module_name and recipe.trigger.search(_text(method)):
                        found.setdefault(f"{cls.__qualname__}.{recipe.method}", recipe.hooks)
        _RECIPE_ENTRIES[module_name] = found
    return _RECIPE_ENTRIES[module_name]


@functools.cache
def recipe_modules() -> tuple[str, ...]:
    """The installed transformers modeling modules where a recipe's trigger matches (their text, not imported)."""
    import transformers

    root = Path(transformers.__file__).parent / "models"
    return tuple(
        f"transformers.models.{path.parent.name}.{path.stem}"
        for path in sorted(root.glob("*/modeling_*.py"))
        if any(r.trigger.search(path.read_text(encoding="utf-8")) for r in RECIPES)
    )


def entries_of(module_name: str) -> dict[str, dict]:
    """Every catalogued rewrite of ``module_name``: its entries, then what recipes pick there."""
    return {**recipe_entries(module_name), **CATALOGUE.get(module_name, {})}


def resolve(module: str, qualname: str):
    """The object ``module:qualname`` names (class attributes looked up through ``__dict__``)."""
    obj = importlib.import_module(module)
    parts = qualname.split(".")
    for part in parts[:-1]:
        obj = getattr(obj, part)
    return obj.__dict__[parts[-1]] if isinstance(obj, type) else getattr(obj, parts[-1])


def _class_of(name_or_class):
    """A class, or the class of that name in transformers or in a catalogued modeling module."""
    if isinstance(name_or_class, type):
        return name_or_class
    import transformers

    found = getattr(transformers, name_or_class, None)
    if isinstance(found, type):
        return found
    # layers and heads transformers does not export (MarianEncoder, MvpPrompt, LEDClassificationHead...)
    for module in (*CATALOGUE, *(m for m in recipe_modules() if _defines(m, name_or_class))):
        try:
            found = getattr(importlib.import_module(module), name_or_class, None)
        except ImportError:  # a model needing a library that is not installed
            continue
        if isinstance(found, type):
            return found
    return None


def _defines(module: str, name: str) -> bool:
    """Does the file of transformers module ``module`` define class ``name`` (read, not imported)?"""
    import transformers

    path = Path(transformers.__file__).parent.joinpath(*module.split(".")[1:]).with_suffix(".py")
    return f"class {name}(" in path.read_text(encoding="utf-8")


class StaleCatalogueWarning(UserWarning):
    """A catalogue entry whose hooks no longer find the code they edit: it is left out."""


# (module, qualname) -> why its hooks no longer apply ("" when they do)
STALE: dict[tuple[str, str], str] = {}


def stale_reason(module: str, qualname: str, entry_hooks: dict) -> str:
    """Why the hooks of ``module:qualname`` no longer apply to the installed code ("" when they do)."""
    if (module, qualname) not in STALE:
        from ..api import transform_method
        from ..load.rewriting import MODEL_OPTIONS

        why = ""
        if entry_hooks:
            try:
                transform_method(resolve(module, qualname), **MODEL_OPTIONS, **entry_hooks)
            except hooks.HookDidNotApply as e:
                why = str(e)
            except UnbranchError:
                pass  # not the catalogue's business: the rewrite reports it where it is used
        STALE[(module, qualname)] = why
    return STALE[(module, qualname)]


def _usable(module: str, qualname: str, entry_hooks: dict) -> bool:
    why = stale_reason(module, qualname, entry_hooks)
    if why:
        import transformers

        warnings.warn(
            f"unbranch catalogue entry {module}:{qualname} does not apply to transformers "
            f"{transformers.__version__}, left out: {why}",
            StaleCatalogueWarning,
            stacklevel=3,
        )
    return not why


def code_needing_rewriting(name_or_class):
    """Rewrite specs (``{"function": f, **hooks}``) a model or layer class needs, or None.

    A layer class gets its own entries; any other class of a catalogued modeling module (a
    full model such as ``BartForConditionalGeneration``) gets every entry of that module,
    possibly none (known, nothing to rewrite). None: a class of no catalogued module. An entry
    whose hooks no longer find the code they edit is left out, with a StaleCatalogueWarning.
    """
    cls = _class_of(name_or_class)
    if cls is None:
        return None
    entries = entries_of(cls.__module__)
    if not entries and cls.__module__ not in CATALOGUE:
        return None
    own = {q: h for q, h in entries.items() if q.split(".")[0] == cls.__name__}
    chosen = own or entries
    module = cls.__module__
    return [{"function": resolve(module, q), **h} for q, h in chosen.items() if _usable(module, q, h)]


def stale_entries(model) -> list[str]:
    """``module:qualname: why`` of every entry for ``model``'s classes that no longer applies."""
    modules = set()
    for cls in dict.fromkeys(type(sub) for sub in model.modules()):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StaleCatalogueWarning)
            code_needing_rewriting(cls)
        modules.add(cls.__module__)
    return [f"{m}:{q}: {why}" for (m, q), why in sorted(STALE.items()) if why and m in modules]


discovery.CATALOGUES.append(code_needing_rewriting)
