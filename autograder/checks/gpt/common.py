"""What several parts of notebook 08's hidden checks share: the seeded torch.Generators (one in the kernel that the
student's code draws from, its twin here) and the small language model lent to `estimate_loss`, `train_step` and
`generate` (a public probe, `coursekit.probe.models.LanguageModelProbe`, built in the kernel with the grader's
weights, and its local copy)."""
from __future__ import annotations

import torch

from autograder.checks.kit import remote as _remote
from autograder.checks.kit.compare import describe
from autograder.checks.kit.draws import generator as probe_generator, seed_for
from autograder.checks.kit.remote import RemoteObject
from autograder.checks.kit.toolkit import grader_step, lend_model, seeded

PROBE_LM = "coursekit.probe.models.LanguageModelProbe"
PROBE_LM_CONFIG = {"vocab_size": 13, "d_model": 8, "max_len": 16, "dropout": 0.5}


def remote_generator(channel, seed: int, device="cpu") -> RemoteObject:
    """A torch.Generator in the kernel, seeded with this submission's seed for `seed` (the student's code draws
    from it)."""
    def make():
        generator = _remote.new(channel, "torch.Generator", device=str(device))
        generator.attr("manual_seed")(seed_for(seed))
        return generator

    return grader_step("seeding a torch.Generator", make)


def local_generator(seed: int, device="cpu") -> torch.Generator:
    """The twin of `remote_generator(channel, seed)` here: the same draws."""
    return probe_generator(seed, device)


def probe_state(seed: int) -> dict:
    """The weights of the lent language model, made under torch's generator seeded with `seed`."""
    from coursekit.probe.models import LanguageModelProbe

    with seeded(seed):
        return {k: v.detach().clone() for k, v in LanguageModelProbe(**PROBE_LM_CONFIG).state_dict().items()}


def local_lm(state: dict, device, training: bool):
    """The lent language model here, holding `state`, in training mode or not."""
    from coursekit.probe.models import LanguageModelProbe

    model = LanguageModelProbe(**PROBE_LM_CONFIG)
    model.load_state_dict(state)
    return model.to(device).train(training)


def remote_lm(channel, state: dict, device, training: bool) -> RemoteObject:
    """The language model lent to the student's function: built in the kernel, holding `state`."""
    return lend_model(channel, PROBE_LM, PROBE_LM_CONFIG, state, device, training,
                      "a small language model lent to your function")


def training_flag(model: RemoteObject, label: str):
    """Whether the lent model is in training mode now."""
    return describe(model, label).get("training")
