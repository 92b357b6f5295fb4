"""Submodel strategies: the rate policies, the rounds' widths and a round's aggregation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict

from fedbench.algorithms.fedrolex import FedRolex
from fedbench.algorithms.fjord import FjORD
from fedbench.algorithms.heterofl import HeteroFL
from fedbench.algorithms.submodels import ModelRate, choose_rates
from fedbench.arrays import state_dict_record
from fedbench.errors import FedbenchError
from fedbench.models import model_config
from fedbench.models.width import build_at
from fedbench.server.offer import Offer
from tests.helpers import task_identity

RATES = [1.0, 0.5, 0.25]
# Four devices: a roomy one, two tighter ones, one that holds nothing; NaN: no limit known.
PEAK = {1.0: np.array([100.0, 100, 100, 100]), 0.5: np.full(4, 40.0), 0.25: np.full(4, 15.0)}
BUDGET = np.array([200.0, 50, 20, 10])
ROUND_S = {
    1.0: np.array([10.0, 30, 80, 5]),
    0.5: np.array([5.0, 12, 40, 3]),
    0.25: np.array([2.0, 5, 15, 1]),
}


def test_budget_picks_the_largest_rate_whose_peak_fits() -> None:
    rates, fits = choose_rates("budget", RATES, 1.0, PEAK, BUDGET, ROUND_S, None)
    assert rates.tolist() == [1.0, 0.5, 0.25, 0.25]
    assert fits.tolist() == [True, True, True, False]  # 15 MB > 10 MB: not even 1/4


def test_deadline_picks_the_largest_rate_that_meets_it_and_fits() -> None:
    rates, fits = choose_rates("deadline", RATES, 1.0, PEAK, BUDGET, ROUND_S, 20.0)
    # device 1: 30 s at 1 > 20 s, 12 s at 1/2; device 2: only 1/4 (15 s); device 3: no memory
    assert rates.tolist() == [1.0, 0.5, 0.25, 0.25]
    assert fits.tolist() == [True, True, True, False]
    tight, ok = choose_rates("deadline", RATES, 1.0, PEAK, BUDGET, ROUND_S, 4.0)
    assert tight.tolist() == [0.25, 0.25, 0.25, 0.25] and ok.tolist() == [True, False, False, False]
    with pytest.raises(FedbenchError, match="round_close.deadline_s"):
        choose_rates("deadline", RATES, 1.0, PEAK, BUDGET, ROUND_S, None)


def test_fixed_sends_everyone_the_rate_and_a_nan_budget_limits_nothing() -> None:
    rates, fits = choose_rates("fixed", RATES, 0.5, PEAK, BUDGET, ROUND_S, None)
    assert rates.tolist() == [0.5] * 4 and fits.tolist() == [True, True, False, False]
    free, ok = choose_rates("budget", RATES, 1.0, PEAK, np.full(4, math.nan), ROUND_S, None)
    assert free.tolist() == [1.0] * 4 and ok.all()


def _messages(strategy: HeteroFL, rnd: int, rates: list[float]) -> tuple[list[Message], dict]:
    task_identity()  # Flower stamps the messages it builds
    cfg = model_config("small_cnn")
    torch.manual_seed(0)
    full = build_at(cfg, 1.0).state_dict()
    strategy.bind(cfg, np.array(rates), Offer.device_of)
    sent = list(
        strategy.configure_train(
            rnd, ArrayRecord(full), ConfigRecord({"lr": 0.1}), Offer(list(range(len(rates))))
        )
    )
    return sent, full


def test_each_device_gets_its_slice_and_rate_and_the_round_averages_per_entry() -> None:
    strategy = HeteroFL(rate_policy="fixed")
    sent, full = _messages(strategy, 1, [1.0, 0.5])
    by_device = {Offer.device_of(m): m for m in sent}
    small = by_device[1].content["arrays"].to_torch_state_dict()
    assert small["features.0.weight"].shape == (8, 3, 3, 3)
    assert by_device[1].content["config"]["model-rate"] == 0.5
    torch.testing.assert_close(small["features.0.weight"], full["features.0.weight"][:8])
    # Replies: the rate-1 device sends all ones (1 example), the half one all threes (3).
    replies = []
    for device, n, value in ((0, 1, 1.0), (1, 3, 3.0)):
        arrays = by_device[device].content["arrays"].to_torch_state_dict()
        trained = {
            k: torch.full_like(v, value) if v.is_floating_point() else v for k, v in arrays.items()
        }
        content = RecordDict(
            {
                "arrays": state_dict_record(trained),
                "metrics": MetricRecord(
                    {
                        "num-examples": n,
                        "model-rate": float(by_device[device].content["config"]["model-rate"]),
                    }
                ),
            }
        )
        replies.append(Message(content, dst_node_id=0, message_type="train"))
    merged, _ = strategy.aggregate_train(1, replies)
    assert merged is not None
    w = merged.to_torch_state_dict()["features.0.weight"]
    assert torch.all(w[:8] == 2.5) and torch.all(w[8:] == 1.0)  # (1 + 9) / 4; only device 0


def test_fjord_sends_each_device_its_largest_width_and_fedrolex_rolls() -> None:
    fjord = FjORD(rate_policy="budget", rates=RATES)
    sent, _ = _messages(fjord, 5, [1.0, 0.25])
    configs = {Offer.device_of(m): m.content["config"] for m in sent}
    # p_max every round (the width is drawn per batch on the device), and what it may draw
    assert [configs[d]["model-rate"] for d in (0, 1)] == [1.0, 0.25]
    assert configs[0]["od-rates"] == RATES and configs[1]["od-rates"] == [0.25]
    assert configs[0]["od-kd"] == [1.0, 1.0]  # self-distillation, on by default
    rolex = FedRolex()
    assert [rolex.extraction(r).offset for r in (1, 2, 3)] == [0, 1, 2]
    sent, full = _messages(rolex, 3, [0.5])
    got = sent[0].content["arrays"].to_torch_state_dict()["features.0.weight"]
    torch.testing.assert_close(got, full["features.0.weight"][2:10])


def test_the_client_half_builds_the_width_it_was_sent() -> None:
    cfg = model_config("small_cnn")
    half = ModelRate(0.25)
    model = half.local_model(build_at(cfg, 1.0), cfg)
    assert model.state_dict()["features.0.weight"].shape == (4, 3, 3, 3)
    assert half.label() == "@r0.25"
    with pytest.raises(FedbenchError, match="model-rate"):
        ModelRate(1.5)


def test_a_device_trains_the_submodel_it_is_sent_and_reports_its_cost() -> None:
    from fedbench.experiment.compose import compose_experiment
    from tests.helpers import client_report, run_client, train_message

    experiment = compose_experiment(
        ["experiment=smoke", "fleet=edge_mixed", "algorithm=heterofl", "scenario.days=1"]
    )
    cfg = experiment.model.to_plain()
    peaks = {}
    for rate in (1.0, 0.25):
        state = build_at(cfg, rate).state_dict()
        msg = train_message(experiment, 0, ArrayRecord(state), config={"model-rate": rate})
        reply = run_client(msg)
        report = client_report(reply)
        assert report.status == "ok" and report.model_rate == rate
        back = reply.content["arrays"].to_torch_state_dict()
        assert back["features.0.weight"].shape == state["features.0.weight"].shape
        assert reply.content["metrics"]["model-rate"] == rate  # the server's aggregation reads it
        peaks[rate] = report.peak_mem_mb
    assert peaks[0.25] < peaks[1.0]  # the cost columns are the submodel's


def test_evaluation_scores_the_whole_model_and_each_rates_submodel() -> None:
    from fedbench.data.source import Tensors
    from fedbench.server.submodels import SubmodelEvaluation

    cfg = model_config("small_cnn")
    torch.manual_seed(0)
    model = build_at(cfg, 1.0)
    test = Tensors(torch.randn(64, 3, 32, 32), torch.randint(0, 10, (64,)))
    evaluation = SubmodelEvaluation(build_at(cfg, 1.0), test, 1, cfg, [1.0, 0.5, 0.0625])
    out = evaluation(1, ArrayRecord(model.state_dict()))
    assert set(out) == {"accuracy", "loss", "accuracy@r1", "accuracy@r0.5", "accuracy@r0.0625"}
    assert out["accuracy@r1"] == out["accuracy"]
    # The half-width score is that of the first half of every layer's channels.
    sub = build_at(cfg, 0.5).eval()
    shapes = {k: tuple(v.shape) for k, v in sub.state_dict().items()}
    from fedbench.models.width import Extraction, extract, indices, width_rule

    full = model.state_dict()
    sub.load_state_dict(extract(full, indices(full, shapes, width_rule(cfg), Extraction())))
    with torch.no_grad():
        expected = (sub(test.x).argmax(1) == test.y).float().mean().item()
    assert out["accuracy@r0.5"] == pytest.approx(expected)


def test_a_fixed_rate_runs_accuracy_is_its_submodels_not_the_untrained_whole() -> None:
    # Under rate_policy=fixed every device trains the rate's slice and nothing else: the
    # run's `accuracy` (targets, figures, the analysis) is that submodel's. In the
    # submodel study the whole model of a fixed 1/16 run scored 42% while what was
    # trained scored 97%, and the analysis said "never reached the target".
    from fedbench.algorithms.submodels import SubmodelStrategy
    from fedbench.data.source import Tensors
    from fedbench.server.submodels import SubmodelEvaluation

    assert SubmodelStrategy(rate_policy="fixed", rate=0.25).trained_rate == 0.25
    assert SubmodelStrategy(rate_policy="budget", rate=0.25).trained_rate == 1.0
    cfg = model_config("small_cnn")
    torch.manual_seed(0)
    model = build_at(cfg, 1.0)
    test = Tensors(torch.randn(64, 3, 32, 32), torch.randint(0, 10, (64,)))
    rates = [1.0, 0.5, 0.0625]
    whole = SubmodelEvaluation(build_at(cfg, 1.0), test, 1, cfg, rates)(
        1, ArrayRecord(model.state_dict())
    )
    fixed = SubmodelEvaluation(build_at(cfg, 1.0), test, 1, cfg, rates, headline=0.3)
    out = fixed(1, ArrayRecord(model.state_dict()))
    assert out["accuracy"] == out["accuracy@r0.3"]  # scored although not in `rates`
    assert out["accuracy@r1"] == whole["accuracy"]
    assert out["loss"] != whole["loss"]  # the slice's loss, not the whole model's


@pytest.mark.parametrize(
    ("overrides", "expect"),
    [
        (["model=vit_tiny"], "no width rule for submodels; supported: alexnet"),
        (["algorithm.rate_policy=deadline", "round_close=all"], "needs round_close.deadline_s"),
        (["mode=fedbuff"], "synchronous rounds only"),
    ],
)
def test_what_a_submodel_run_cannot_start_with_is_one_line(
    overrides: list[str], expect: str
) -> None:
    from fedbench.experiment.build import build_algorithm
    from fedbench.experiment.compose import compose_experiment
    from fedbench.server.submodels import check_submodels

    experiment = compose_experiment(["experiment=smoke", "algorithm=heterofl", *overrides])
    with pytest.raises(FedbenchError, match=expect) as err:
        check_submodels(build_algorithm(experiment), experiment)
    assert "\n" not in str(err.value)


def test_evaluation_re_estimates_batchnorm_on_the_servers_split_not_the_test_split() -> None:
    # HeteroFL's static BN: statistics averaged over widths describe none of them.
    from fedbench.data.source import Tensors
    from fedbench.models.width import build_at
    from fedbench.scenarios.pretrain import recalibrate_batchnorm
    from fedbench.server.submodels import SubmodelEvaluation

    cfg = model_config("small_cnn")
    torch.manual_seed(0)
    model = build_at(cfg, 1.0)
    state = model.state_dict()
    for key, value in state.items():
        if key.endswith("running_var"):
            value.fill_(1e4)  # what no width's activations have
    arrays = ArrayRecord(state)
    test = Tensors(torch.randn(64, 3, 32, 32), torch.randint(0, 10, (64,)))
    server = Tensors(torch.randn(48, 3, 32, 32) + 1.0, torch.randint(0, 10, (48,)))
    evaluation = SubmodelEvaluation(build_at(cfg, 1.0), test, 1, cfg, [1.0, 0.5], server, 16)
    out = evaluation(1, arrays)
    # The whole model was scored with the statistics one pass over the server's split gives.
    expected = build_at(cfg, 1.0)
    expected.load_state_dict(arrays.to_torch_state_dict())
    with torch.no_grad():
        recalibrate_batchnorm(expected, server, 16)
    got = evaluation.model.state_dict()
    for key, value in expected.state_dict().items():
        assert torch.allclose(got[key].float(), value.float()), key
    assert not torch.allclose(
        got["features.1.running_var"], torch.full_like(got["features.1.running_var"], 1e4)
    )
    expected.eval()
    with torch.no_grad():
        accuracy = (expected(test.x).argmax(1) == test.y).float().mean().item()
    assert out["accuracy"] == pytest.approx(accuracy)
    # The arrays sent to devices keep the aggregated statistics.
    assert float(arrays.to_torch_state_dict()["features.1.running_var"].mean()) == 1e4


def test_a_fixed_rate_daily_run_starts_from_its_own_pretrained_submodel() -> None:
    # The daily scenario fine-tunes a server-pretrained model. A fixed-rate run trains
    # only its slice, so the server pretrains that submodel; the study's first
    # `fedavg_smallest` daily runs started from the 1/16 slice of the pretrained whole
    # model (19% on digits at day 0) instead.
    from fedbench.experiment.compose import compose_experiment
    from fedbench.experiment.fleet import expand_fleet
    from fedbench.models.width import Extraction, extract, indices, width_rule
    from fedbench.scenarios.pretrain import pretrained_state
    from fedbench.server.apps import OwnApp
    from fedbench.train.loop import evaluate

    def app(*overrides: str) -> OwnApp:
        experiment = compose_experiment(["experiment=study_daily", "seed=0", *overrides])
        return OwnApp(experiment, expand_fleet(experiment.fleet))

    fixed = ["algorithm=heterofl", "algorithm.rate_policy=fixed", "algorithm.rate=0.0625"]
    small, whole = app(*fixed), app("algorithm=fedavg")
    cfg = small.experiment.model.to_plain()
    sub = build_at(cfg, 0.0625)
    shapes = {k: tuple(v.shape) for k, v in sub.state_dict().items()}

    def slice_of(side: OwnApp) -> dict[str, torch.Tensor]:
        full = side.initial_arrays()[0].to_torch_state_dict()
        return extract(full, indices(full, shapes, width_rule(cfg), Extraction("first")))

    def slice_accuracy(side: OwnApp) -> float:
        sub.load_state_dict(slice_of(side))
        return evaluate(sub, side.ctx.splits.test)[1]

    # The slice is the submodel pretrained on its own (the same cache entry) ...
    mine = slice_of(small)
    own, cached = pretrained_state(
        small.experiment,
        small.scenario.pretrain,
        small.ctx,
        lambda: build_at(cfg, 0.0625),
        small.threads,
    )
    assert cached and all(torch.equal(v, own[k]) for k, v in mine.items())
    # ... which scores far above the same slice of the pretrained whole model.
    assert slice_accuracy(small) > slice_accuracy(whole) + 0.3
    # The rounds scenario (no pretraining) starts from the whole model's seeded initial
    # values, as before.
    rounds = compose_experiment(["experiment=study_rounds", "seed=0", *fixed])
    side = OwnApp(rounds, expand_fleet(rounds.fleet))
    plain = OwnApp(
        compose_experiment(["experiment=study_rounds", "seed=0"]), expand_fleet(rounds.fleet)
    )
    a, b = (
        side.initial_arrays()[0].to_torch_state_dict(),
        plain.initial_arrays()[0].to_torch_state_dict(),
    )
    assert all(torch.equal(a[k], b[k]) for k in a)
