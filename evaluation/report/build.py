"""Building the report of a judged run from the task universe, trajectories and verdicts.

The success rate is over the *full* task universe (the ``--tasks`` list, else every task seen in
the logs): a task without a trajectory counts as a failure and is listed, never dropped. A task
the judge never decided (its requests failed) has no outcome: it is listed and left out of the
rates (they rest on the tasks with an outcome), never counted as a failure; with no outcome at
all (every task undecided) there is no rate (``None``), not 0%.
"""

from __future__ import annotations

import itertools
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence

from evaluation.judge.verdict_log import VerdictRecord
from evaluation.report.models import (
    Confirmations,
    ErrorTaxonomy,
    RetrievalSplit,
    EfficiencyGroup,
    Health,
    HumanAgreement,
    InputInfo,
    JudgeInfo,
    JudgePair,
    JudgeStats,
    JuryAgreement,
    ToolUsage,
    Outcome,
    Rate,
    Report,
    Retrieval,
    ServerHealth,
    TaskInfo,
    TaskRow,
    Usage,
)
from evaluation.report.stats import cohen_kappa, confusion, fleiss_kappa
from evaluation.taxonomy.model import Diagnosis
from evaluation.tasks import CATEGORIES, normalise_server_name, normalise_tool_name
from evaluation.trajectories import UNAVAILABLE_KINDS, Trajectory


def _gold_diagnostics(row: TaskRow, trajectory: Trajectory) -> None:
    gold = {normalise_tool_name(name) for name in row.gold_tools if name.strip()}
    if not gold:
        return
    ranks = [
        rank
        for call in trajectory.route_calls
        for rank, (_server, tool) in enumerate(call.hits, 1)
        if normalise_tool_name(tool) in gold
    ]
    row.gold_retrieved = bool(ranks) if trajectory.route_calls else None
    row.gold_rank = min(ranks) if ranks else None
    row.gold_executed = any(normalise_tool_name(call.tool or "") in gold for call in trajectory.execute_calls)


def _unavailable_servers(trajectory: Trajectory) -> list[str]:
    """Servers that failed as unavailable and never answered successfully afterwards."""
    state: dict[str, bool] = {}
    for call in trajectory.execute_calls:
        if not call.server:
            continue
        if call.is_error and call.error_kind in UNAVAILABLE_KINDS:
            state[call.server] = True
        elif not call.is_error:
            state[call.server] = False
    return sorted(server for server, down in state.items() if down)


def _row(
    info: TaskInfo,
    trajectory: Trajectory | None,
    record: VerdictRecord | None,
    human: bool | None,
    diagnosis: Diagnosis | None = None,
) -> TaskRow:
    if trajectory is None:
        verdict: Outcome = "no_trajectory"
    elif record is None:
        verdict = "not_judged"
    else:
        verdict = record.verdict
    row = TaskRow(
        task_id=info.task_id,
        category=info.category,
        question=info.question,
        verdict=verdict,
        human=human,
        gold_tools=info.gold_tools or (trajectory.gold_tools if trajectory else []),
    )
    if record is not None:
        row.judges = {vote.model: vote.verdict for vote in record.judges}
        row.thoughts = record.thoughts
    if trajectory is not None:
        row.has_trajectory = True
        row.complete = trajectory.complete
        row.turns = trajectory.estimated_turns
        row.turns_estimated = trajectory.turns is None
        row.route_calls = len(trajectory.route_calls)
        row.execute_calls = len(trajectory.execute_calls)
        row.distinct_tools = trajectory.distinct_tools
        row.tool_errors = trajectory.tool_errors
        if trajectory.usage is not None:
            row.input_tokens = trajectory.usage.input_tokens
            row.output_tokens = trajectory.usage.output_tokens
            row.cost = trajectory.usage.cost
        _gold_diagnostics(row, trajectory)
        row.unavailable_servers = _unavailable_servers(trajectory)
        row.confirmations = dict(Counter(confirmation.answer for confirmation in trajectory.confirmations))
        row.started = trajectory.started
        row.seconds, row.tool_seconds = trajectory.seconds, trajectory.tool_seconds
        row.run_status = trajectory.end_status
        row.run_error_kind = trajectory.end_error_kind
        row.run_broke = trajectory.run_broke
        if row.verdict != "success":
            row.diagnosis = diagnosis
    return row


def _mean(values: Sequence[float | int | None], digits: int | None = 3) -> float | None:
    """The mean of the values present, rounded to ``digits`` (``None``: not rounded)."""
    present = [value for value in values if value is not None]
    if not present:
        return None
    mean = statistics.fmean(present)
    return mean if digits is None else round(mean, digits)


def efficiency_group(rows: Sequence[TaskRow]) -> EfficiencyGroup:
    """Means per task over ``rows`` (tokens and cost over the rows that logged them)."""
    return EfficiencyGroup(
        n=len(rows),
        turns=_mean([row.turns for row in rows]),
        route_calls=_mean([row.route_calls for row in rows]),
        execute_calls=_mean([row.execute_calls for row in rows]),
        distinct_tools=_mean([row.distinct_tools for row in rows]),
        tool_errors=_mean([row.tool_errors for row in rows]),
        tokens=_mean(
            [
                (row.input_tokens or 0) + (row.output_tokens or 0) if row.input_tokens is not None else None
                for row in rows
            ]
        ),
        # Not rounded: a cheap model's cost per task ($0.0004) read 0.0, and the leaderboard then
        # took the run for one that logged no cost.
        cost=_mean([row.cost for row in rows], digits=None),
        seconds=_mean([row.seconds for row in rows], digits=1),
        tool_seconds=_mean([row.tool_seconds for row in rows], digits=1),
    )


def _retrieval(rows: Sequence[TaskRow]) -> Retrieval:
    with_gold = [row for row in rows if row.gold_tools and row.has_trajectory]
    routed = [row for row in with_gold if row.gold_retrieved is not None]
    ranks = [row.gold_rank for row in routed if row.gold_rank is not None]
    n = len(routed)
    return Retrieval(
        tasks_with_gold=len(with_gold),
        tasks_routed=n,
        gold_retrieved=len(ranks),
        gold_retrieved_rate=len(ranks) / n if n else None,
        recall_at_1=sum(1 for rank in ranks if rank <= 1) / n if n else None,
        recall_at_5=sum(1 for rank in ranks if rank <= 5) / n if n else None,
        mean_best_rank=_mean(ranks),
        median_best_rank=float(statistics.median(ranks)) if ranks else None,
        gold_executed=sum(1 for row in with_gold if row.gold_executed),
    )


def _health(rows: Sequence[TaskRow], trajectories: dict[str, Trajectory]) -> Health:
    calls: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    timeouts: Counter[str] = Counter()
    kinds: dict[str, Counter[str]] = {}
    tasks: dict[str, set[str]] = {}
    spellings: dict[str, Counter[str]] = {}
    for trajectory in trajectories.values():
        for call in trajectory.execute_calls:
            spelled = call.server or "(none)"
            server = normalise_server_name(spelled)
            spellings.setdefault(server, Counter())[spelled] += 1
            calls[server] += 1
            tasks.setdefault(server, set()).add(trajectory.task_id)
            if call.is_error:
                errors[server] += 1
                kinds.setdefault(server, Counter())[call.error_kind or "tool_error"] += 1
                if call.error_kind == "timeout":
                    timeouts[server] += 1
    servers = [
        ServerHealth(
            server=spellings[server].most_common(1)[0][0],
            aliases=sorted(set(spellings[server]) - {spellings[server].most_common(1)[0][0]}),
            calls=count,
            errors=errors[server],
            timeouts=timeouts[server],
            error_rate=errors[server] / count,
            error_kinds=dict(kinds.get(server, {})),
            tasks=len(tasks[server]),
        )
        for server, count in calls.items()
    ]
    servers.sort(key=lambda health: (-health.errors, -health.calls, health.server))
    # An undecided task is not unsuccessful: it has no outcome to trace back to a server.
    traced = [
        {"task_id": row.task_id, "category": row.category, "servers": row.unavailable_servers}
        for row in rows
        if row.has_outcome and row.verdict != "success" and row.unavailable_servers
    ]
    return Health(servers=servers, failures_from_unavailable_servers=traced)


def _tool_usage(rows: Sequence[TaskRow], trajectories: Mapping[str, Trajectory]) -> list[ToolUsage]:
    """Per tool: route answers that showed it, execute calls of it, the tasks of each; names spelled
    differently (case, ``_``/``-``, spaces) are one tool, shown as most often spelled."""
    verdicts = {row.task_id: row.verdict for row in rows}
    golds = Counter(tool for row in rows for tool in {normalise_tool_name(name) for name in row.gold_tools})
    usage: dict[tuple[str, str], ToolUsage] = {}
    spellings: dict[tuple[str, str], Counter[tuple[str, str]]] = {}
    seen: dict[tuple[str, str], tuple[set[str], set[str]]] = {}

    def entry(server: str | None, tool: str | None) -> tuple[str, str]:
        spelled = (server or "(none)", tool or "(none)")
        key = (normalise_server_name(spelled[0]), normalise_tool_name(spelled[1]))
        spellings.setdefault(key, Counter())[spelled] += 1
        if key not in usage:
            usage[key] = ToolUsage(server=spelled[0], tool=spelled[1], gold_tasks=golds.get(key[1], 0))
            seen[key] = (set(), set())
        return key

    for trajectory in trajectories.values():
        for call in trajectory.calls:
            if call.kind == "route":
                for server, tool in dict.fromkeys(call.hits):  # a tool twice in one answer is shown once
                    key = entry(server, tool)
                    usage[key].routed += 1
                    seen[key][0].add(trajectory.task_id)
            else:
                key = entry(call.server, call.tool)
                usage[key].executed += 1
                usage[key].errors += call.is_error
                seen[key][1].add(trajectory.task_id)
    for key, tool in usage.items():
        tool.server, tool.tool = spellings[key].most_common(1)[0][0]
        routed_in, executed_in = seen[key]
        tool.routed_tasks, tool.executed_tasks = len(routed_in), len(executed_in)
        tool.successful_tasks = sum(1 for task in executed_in if verdicts.get(task) == "success")
    return sorted(usage.values(), key=lambda t: (-t.executed, -t.routed, t.server, t.tool))


def _human(rows: Sequence[TaskRow], human: dict[str, bool]) -> HumanAgreement | None:
    # An undecided task has no verdict to agree or disagree with.
    labelled = [row for row in rows if row.human is not None and row.has_outcome]
    if not labelled:
        return None
    said = [row.verdict == "success" for row in labelled]
    truth = [bool(row.human) for row in labelled]
    table = confusion(said, truth)
    universe = {row.task_id for row in rows}
    return HumanAgreement(
        n_labelled=len(labelled),
        human_success_rate=sum(truth) / len(truth),
        judge_success_rate=sum(said) / len(said),
        agreement=table.agreement,
        cohen_kappa=cohen_kappa(table),
        confusion=table,
        judge_abstains=sum(1 for row in labelled if row.verdict == "abstain"),
        false_successes=[row.task_id for row in labelled if row.verdict == "success" and not row.human],
        false_failures=[row.task_id for row in labelled if row.verdict != "success" and row.human],
        labels_outside_tasks=sum(1 for task_id in human if task_id not in universe),
    )


def _judge_stats(models: Sequence[str], rows: Sequence[TaskRow]) -> list[JudgeStats]:
    """Each judge over ``rows``, the tasks with an outcome. A task without a trajectory has no
    vote and is a failure of every judge, as it is of the headline: counting only failure votes
    left a row whose success, failure and abstain did not add up to its rate's denominator."""
    stats = []
    n = len(rows)
    for model in models:
        votes = [row.judges.get(model) for row in rows]
        success, abstain = votes.count("success"), votes.count("abstain")
        entry = JudgeStats(
            model=model,
            success=success,
            failure=n - success - abstain,
            abstain=abstain,
            success_rate=success / n if n else None,
        )
        labelled = [(row.judges.get(model) == "success", bool(row.human)) for row in rows if row.human is not None]
        if labelled:
            table = confusion([a for a, _ in labelled], [b for _, b in labelled])
            entry.human_agreement = table.agreement
            entry.cohen_kappa = cohen_kappa(table)
        stats.append(entry)
    return stats


def _jury_agreement(models: Sequence[str], rows: Sequence[TaskRow]) -> JuryAgreement | None:
    """How far a jury's judges agree with each other, on the tasks every one of them voted on
    (success vs not): the reliability question a jury raises, answerable without human labels."""
    if len(models) < 2:
        return None
    voted = [row for row in rows if all(row.judges.get(model) for model in models)]
    votes = [[row.judges[model] == "success" for model in models] for row in voted]
    pairs = []
    for (i, a), (j, b) in itertools.combinations(enumerate(models), 2):
        table = confusion([row[i] for row in votes], [row[j] for row in votes])
        pairs.append(JudgePair(judge_a=a, judge_b=b, n=table.n, agreement=table.agreement, cohen_kappa=cohen_kappa(table)))
    return JuryAgreement(
        n=len(voted),
        fleiss_kappa=fleiss_kappa(votes),
        split_tasks=[row.task_id for row, said in zip(voted, votes, strict=True) if len(set(said)) > 1],
        pairs=pairs,
    )


def _most_common(values: Sequence[str | None]) -> str | None:
    present = Counter(value for value in values if value)
    return present.most_common(1)[0][0] if present else None


def _retrieval_split(rows: Sequence[TaskRow]) -> RetrievalSplit | None:
    # Rates, so over the tasks with an outcome: an undecided task counted as a failure here.
    with_gold = [row for row in rows if row.gold_tools and row.has_trajectory and row.has_outcome]
    if not with_gold:
        return None

    def rate(selected: list[TaskRow]) -> Rate:
        return Rate.of(sum(1 for row in selected if row.verdict == "success"), len(selected))

    return RetrievalSplit(
        returned=rate([row for row in with_gold if row.gold_retrieved is True]),
        not_returned=rate([row for row in with_gold if row.gold_retrieved is False]),
        no_route=rate([row for row in with_gold if row.gold_retrieved is None]),
    )


def _confirmations(rows: Sequence[TaskRow], trajectories: dict[str, Trajectory]) -> Confirmations:
    answers: Counter[str] = Counter()
    for row in rows:
        answers.update(row.confirmations)
    return Confirmations(
        policy=sorted({t.confirm_policy for t in trajectories.values() if t.confirm_policy}),
        requested=sum(answers.values()),
        tasks_with_confirmations=sum(1 for row in rows if row.confirmations),
        by_answer=dict(answers),
    )


def _taxonomy(rows: Sequence[TaskRow]) -> ErrorTaxonomy:
    taxonomy = ErrorTaxonomy()
    for row in rows:
        if row.diagnosis is None:
            continue
        label = row.diagnosis.label
        taxonomy.unsuccessful += 1
        taxonomy.counts[label] = taxonomy.counts.get(label, 0) + 1
        per_category = taxonomy.by_category.setdefault(row.category, {})
        per_category[label] = per_category.get(label, 0) + 1
        taxonomy.llm_second_opinions += row.diagnosis.source == "llm"
    return taxonomy


def build_report(
    *,
    universe: Sequence[TaskInfo],
    trajectories: dict[str, Trajectory],
    verdicts: dict[str, VerdictRecord],
    human: dict[str, bool] | None,
    judge: JudgeInfo,
    inputs: InputInfo,
    diagnoses: Mapping[str, Diagnosis] | None = None,
) -> Report:
    human = human or {}
    diagnoses = diagnoses or {}
    rows = [
        _row(
            info,
            trajectories.get(info.task_id),
            verdicts.get(info.task_id),
            human.get(info.task_id),
            diagnoses.get(info.task_id),
        )
        for info in universe
    ]
    started = sorted(row.started for row in rows if row.started)
    n = len(rows)
    success = sum(1 for row in rows if row.verdict == "success")
    categories = [c for c in CATEGORIES if any(row.category == c for row in rows)]
    categories += sorted({row.category for row in rows} - set(categories))
    judged = [row for row in rows if row.verdict in ("success", "failure", "abstain")]
    # The rates rest on the tasks with an outcome -- a task without a trajectory is a failure even
    # when nothing was judged; with none, ``Rate.of`` and the judges' stats give no rate, not 0%.
    decided = [row for row in rows if row.has_outcome]
    by_category = {}
    for category in categories:
        members = [row for row in decided if row.category == category]
        by_category[category] = Rate.of(sum(1 for row in members if row.verdict == "success"), len(members))
    overall = Rate.of(success, len(decided))
    agreement = _human(rows, human)
    usage_rows = [row for row in rows if row.input_tokens is not None]
    costs = [row.cost for row in usage_rows if row.cost is not None]
    return Report(
        judge=judge,
        inputs=inputs,
        agent=_most_common([t.agent for t in trajectories.values()]),
        model=_most_common([t.model or (t.usage.model if t.usage else None) for t in trajectories.values()]),
        first_task=started[0] if started else None,
        last_task=started[-1] if started else None,
        n_tasks=n,
        n_with_trajectory=sum(1 for row in rows if row.has_trajectory),
        n_judged=len(judged),
        success=success,
        failure=len(decided) - success,
        success_rate=overall.rate,
        ci95=overall.ci95,
        by_category=by_category,
        abstains=[row.task_id for row in rows if row.verdict == "abstain"],
        not_judged=[row.task_id for row in rows if not row.has_outcome],
        missing_trajectories=[row.task_id for row in rows if row.verdict == "no_trajectory"],
        run_broke={row.task_id: row.run_broke for row in decided if row.run_broke and row.verdict != "success"},
        judges=_judge_stats(judge.models, decided),
        human_agreement=agreement.agreement if agreement else None,
        cohen_kappa=agreement.cohen_kappa if agreement else None,
        confusion=agreement.confusion if agreement else None,
        human=agreement,
        jury=_jury_agreement(judge.models, decided),
        efficiency={
            "all": efficiency_group([row for row in rows if row.has_trajectory]),
            "success": efficiency_group([row for row in rows if row.verdict == "success"]),
            # An undecided task is neither: it is only in "all".
            "failure": efficiency_group(
                [row for row in rows if row.has_trajectory and row.has_outcome and row.verdict != "success"]
            ),
        },
        usage=Usage(
            tasks_with_usage=len(usage_rows),
            input_tokens=sum(row.input_tokens or 0 for row in usage_rows),
            output_tokens=sum(row.output_tokens or 0 for row in usage_rows),
            cost=sum(costs) if costs else None,
            judge_input_tokens=sum(record.input_tokens for record in verdicts.values()),
            judge_output_tokens=sum(record.output_tokens for record in verdicts.values()),
        ),
        retrieval=_retrieval(rows),
        retrieval_split=_retrieval_split(rows),
        health=_health(rows, trajectories),
        tools=_tool_usage(rows, trajectories),
        confirmations=_confirmations(rows, trajectories),
        taxonomy=_taxonomy(rows),
        tasks=rows,
    )


