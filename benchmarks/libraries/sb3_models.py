"""stable-baselines3 (reinforcement learning): the policies of PPO/A2C, DQN, SAC and TD3 on observations of every space.

    pip install stable-baselines3==2.9.2   # with gymnasium 1.4.0

Policies are built from gymnasium spaces alone (no environment runs): Box, Discrete, MultiDiscrete,
MultiBinary, images and Dict observations; Discrete, Box, MultiDiscrete and MultiBinary actions.
Each entry is a forward of the policy: deterministic actions (the distribution's mode), stochastic
ones (a seeded sample), values and log-probabilities of given actions. The batch of observations
is dynamic.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from .harness import BATCH, Built, Entry

B = 4


def _lr(_):
    return 3e-4


def spaces():
    from gymnasium import spaces as S

    return {
        "box": S.Box(-1.0, 1.0, (5,), np.float32),
        "discrete": S.Discrete(6),
        "multidiscrete": S.MultiDiscrete([3, 4]),
        "multibinary": S.MultiBinary(4),
        "image": S.Box(0, 255, (3, 40, 40), np.uint8),
        "dict": S.Dict({"pos": S.Box(-1.0, 1.0, (3,), np.float32), "mode": S.Discrete(3)}),
    }


def obs(space, seed: int = 0):
    """A batch of B observations of ``space``, as tensors (obs_as_tensor of samples)."""
    from stable_baselines3.common.utils import obs_as_tensor

    space.seed(seed)
    samples = [space.sample() for _ in range(B)]
    if isinstance(samples[0], dict):
        batch = {k: np.stack([s[k] for s in samples]) for k in samples[0]}
    else:
        batch = np.stack(samples)
    return obs_as_tensor(batch, torch.device("cpu"))


def obs_shapes(x):
    return {k: {0: BATCH} for k in x} if isinstance(x, dict) else {0: BATCH}


class Act(torch.nn.Module):
    """``policy(obs, deterministic)``: actions, values and log-probabilities (actor-critic), or actions alone."""

    def __init__(self, policy, deterministic: bool = True, method: str = "forward"):
        super().__init__()
        self.policy, self.deterministic, self.method = policy, deterministic, method

    def forward(self, obs):
        if self.method == "forward":
            return self.policy(obs, deterministic=self.deterministic)
        return self.policy._predict(obs, deterministic=self.deterministic)


class Evaluate(torch.nn.Module):
    def __init__(self, policy):
        super().__init__()
        self.policy = policy

    def forward(self, obs, actions):
        return self.policy.evaluate_actions(obs, actions)


def actor_critic(observation: str, action: str, deterministic: bool = True, evaluate: bool = False):
    def build():
        from stable_baselines3.common.policies import (
            ActorCriticCnnPolicy,
            ActorCriticPolicy,
            MultiInputActorCriticPolicy,
        )

        sp = spaces()
        cls = {"image": ActorCriticCnnPolicy, "dict": MultiInputActorCriticPolicy}.get(observation, ActorCriticPolicy)
        torch.manual_seed(0)
        policy = cls(sp[observation], sp[action], _lr, net_arch=dict(pi=[16], vf=[16]))
        x = obs(sp[observation])
        flips = {"other observations": {"obs": obs(sp[observation], seed=1)}}
        if evaluate:
            actions = obs(sp[action], seed=2)
            return Built(
                Evaluate(policy),
                {"obs": x, "actions": actions},
                {"obs": obs_shapes(x), "actions": {0: BATCH}},
                flips={"other": {"obs": obs(sp[observation], seed=1), "actions": obs(sp[action], seed=3)}},
            )
        return Built(
            Act(policy, deterministic),
            {"obs": x},
            {"obs": obs_shapes(x)},
            flips=flips,
            seed=None if deterministic else 0,
        )

    return build


def off_policy(algo: str, observation: str = "box", deterministic: bool = True):
    def build():
        sp = spaces()
        torch.manual_seed(0)
        if algo == "dqn":
            from stable_baselines3.dqn.policies import CnnPolicy, DQNPolicy

            cls = CnnPolicy if observation == "image" else DQNPolicy
            policy = cls(sp[observation], sp["discrete"], _lr, net_arch=[16])
        elif algo == "sac":
            from stable_baselines3.sac.policies import SACPolicy

            policy = SACPolicy(sp[observation], sp["box"], _lr, net_arch=[16])
        else:
            from stable_baselines3.td3.policies import TD3Policy

            policy = TD3Policy(sp[observation], sp["box"], _lr, net_arch=[16])
        x = obs(sp[observation])
        return Built(
            Act(policy, deterministic, method="_predict"),
            {"obs": x},
            {"obs": obs_shapes(x)},
            flips={"other observations": {"obs": obs(sp[observation], seed=1)}},
            seed=None if deterministic else 0,
        )

    return build


def sac_critic() -> Built:
    from stable_baselines3.sac.policies import SACPolicy

    class Critic(torch.nn.Module):
        def __init__(self, policy):
            super().__init__()
            self.policy = policy

        def forward(self, obs, actions):
            return self.policy.critic(obs, actions)

    sp = spaces()
    torch.manual_seed(0)
    policy = SACPolicy(sp["box"], sp["box"], _lr, net_arch=[16])
    return Built(
        Critic(policy),
        {"obs": obs(sp["box"]), "actions": obs(sp["box"], 1)},
        {"obs": {0: BATCH}, "actions": {0: BATCH}},
    )


def policies() -> dict:
    return {
        "PPO.box-discrete": actor_critic("box", "discrete"),
        "PPO.box-box": actor_critic("box", "box"),
        "PPO.box-box.sample": actor_critic("box", "box", deterministic=False),
        "PPO.discrete-discrete": actor_critic("discrete", "discrete"),
        "PPO.multidiscrete-multidiscrete": actor_critic("multidiscrete", "multidiscrete"),
        "PPO.box-multibinary": actor_critic("box", "multibinary"),
        "PPO.image-discrete": actor_critic("image", "discrete"),
        "PPO.dict-box": actor_critic("dict", "box"),
        "PPO.evaluate_actions.box": actor_critic("box", "box", evaluate=True),
        "PPO.evaluate_actions.discrete": actor_critic("box", "discrete", evaluate=True),
        "DQN.box": off_policy("dqn"),
        "DQN.image": off_policy("dqn", "image"),
        "SAC.actor": off_policy("sac"),
        "SAC.actor.sample": off_policy("sac", deterministic=False),
        "SAC.critic": sac_critic,
        "TD3.actor": off_policy("td3"),
    }


def _lazy(name: str) -> Built:
    return policies()[name]()


def entries() -> list[Entry]:
    return [Entry(name, "stable_baselines3", functools.partial(_lazy, name)) for name in policies()]
