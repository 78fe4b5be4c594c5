"""The soak's judgement and its printed summary."""

from __future__ import annotations

from typing import Any

#: A process whose RSS more than doubles after warm-up, plus this much, fails the short soak's
#: generous bound; the finer flag (``memory.GROWTH_FLAG_*``) is reported either way.
EXPLOSION_KB = 50 * 1024


def verdict(doc: dict[str, Any]) -> dict[str, Any]:
    """What held and what did not: nothing lost, the keyspace back, memory flat."""
    book = doc["ledger"]
    settled = doc["keyspace"]["settled"]
    problems = settled["problems"]
    memory = doc["memory"]
    exploded = [
        m["pid"]
        for m in memory
        if m["rss_kb"]["after_warmup"] is not None
        and m["rss_kb"]["end"] > 2 * m["rss_kb"]["after_warmup"] + EXPLOSION_KB
    ]
    checks = {
        "nothing_lost": book["lost"] == 0 and book["duplicates"]["accepted_copies_never_run"] == 0,
        "every_batch_callback_ran": book["batch_callbacks_missing"] == 0,
        "decrypted_arguments_right": book["wrong_decrypted_arguments"] == 0,
        "no_work_left_in_the_keyspace": not any(doc["keyspace"]["work_left_settled"].values()),
        "no_key_breaks_its_rule": not problems,
        "no_dead_jobs": doc["keyspace"]["dead_and_retry"]["dead"]["size"] == 0,
        "memory_flat": not any(m.get("verdict") == "GROWS" for m in memory),
        "no_memory_explosion": not exploded,
        "drained": doc["drained"]["complete"],
    }
    return {"healthy": all(checks.values()), "checks": checks, "exploded_pids": exploded}


def _mb(kb: int | None) -> str:
    return "-" if kb is None else f"{kb / 1024:.1f}"


def summary(doc: dict[str, Any]) -> str:
    book = doc["ledger"]
    dups = book["duplicates"]
    lines = [
        "",
        f"jobs {book['jobs']}: finished {book['finished']}, lost {book['lost']}"
        + (f" (first: {book['lost_first'][:10]}; found in {doc['lost_found_in']})" if book["lost"] else ""),
        f"duplicate executions {dups['total']}: {dups['at_least_once_after_a_fault']} after a fault (at-least-once),"
        f" {dups['after_a_push_that_raised']} after a push that raised and was sent again;"
        f" accepted copies never run {dups['accepted_copies_never_run']}",
        f"pushes that raised and were sent again {book['pushes_that_raised_and_were_sent_again']};"
        f" deliberate unique duplicates accepted {book['deliberate_duplicate_pushes_accepted']}",
        f"batches {book['batches']}: callbacks missing {book['batch_callbacks_missing']},"
        f" run again {book['batch_callbacks_run_again']};"
        f" wrong decrypted arguments {book['wrong_decrypted_arguments']}",
        f"producer: pushed {doc['producer'].get('pushed')} in {doc['producer'].get('elapsed_s')} s;"
        f" drained {doc['drained']['after_producer_s']} s after it",
        f"faults injected: {doc['faults_injected']}; swarm respawns {doc['swarm_restarts']['respawned']}",
        "",
        "memory (MB)       pid  lived s   RSS first  warm   end   peak  slope KB/min   USS warm  end  verdict",
    ]
    for m in doc["memory"]:
        rss, uss = m["rss_kb"], m["uss_kb"]
        lines.append(
            f"  {m['role']:<7} {m['pid']:>9} {m['lived_s']:>8} {_mb(rss['first']):>10} {_mb(rss['after_warmup']):>5}"
            f" {_mb(rss['end']):>5} {_mb(m['rss_peak_kb']):>6} {m.get('rss_slope_kb_per_min', '-'):>13}"
            f" {_mb(uss['after_warmup']):>9} {_mb(uss['end']):>4}  {m['verdict']}"
        )
    ks = doc["keyspace"]
    lines += [
        "",
        f"keyspace: start {ks['start']['dbsize']} keys, drained {ks['drained']['dbsize']},"
        f" settled {ks['settled']['dbsize']}, after the swarm stopped {ks['after_swarm_stop']['dbsize']}",
        "  pattern                  category   start  settled  members  TTL range",
    ]
    names = sorted(set(ks["start"]["patterns"]) | set(ks["settled"]["patterns"]))
    for name in names:
        before = ks["start"]["patterns"].get(name, {"keys": 0})
        after = ks["settled"]["patterns"].get(name, {"keys": 0, "members": 0, "ttl_min": None, "ttl_max": None})
        category = (after.get("category") or before.get("category") or "")[:9]
        ttl = "-" if after.get("ttl_min") is None else f"{after['ttl_min']}..{after['ttl_max']} s"
        lines.append(
            f"  {name:<24} {category:<9} {before['keys']:>6} {after['keys']:>8} {after.get('members', 0):>8}  {ttl}"
        )
    index = ks["batch_index"]
    lines.append(
        f"  batches index: {index['members']} members,"
        f" {index['members_whose_batch_expired']} of them naming a batch already expired"
    )
    for problem in ks["settled"]["problems"][:20]:
        lines.append(f"  PROBLEM {problem['key']}: {problem['problem']}")
    lines += ["", "verdict: " + ("healthy" if doc["verdict"]["healthy"] else "NOT healthy")]
    lines += [f"  {name}: {'yes' if ok else 'NO'}" for name, ok in doc["verdict"]["checks"].items()]
    return "\n".join(lines)
