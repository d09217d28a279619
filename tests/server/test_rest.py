"""REST under /v1, in process: every route, its scope rules and its errors."""

from __future__ import annotations

import json

from conftest import Server

from membot import MAX_LINE_CHARS, Memory, ScriptedLLM
from membot.server import create_app
from membot.service.keys import create_key, revoke_key


def _error(response) -> dict:
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) - {"stored"} == {"type", "message"}, body
    return body["error"]


def test_readyz_says_when_the_store_cannot_be_read(server: Server, monkeypatch):
    """/healthz answered 200 all the while PostgreSQL was down (a probe): /readyz asks the
    store, and says 503 without saying where it is."""
    from membot import StoreError

    def down(timeout: float) -> None:
        assert timeout <= 2  # not the 30 s a request waits for a connection
        raise StoreError(f"the store at {server.memory.location} failed: connection refused")

    monkeypatch.setattr(server.memory.store, "check_reachable", down)
    answer = server.client.get("/readyz")
    assert answer.status_code == 503 and server.memory.location not in answer.text
    assert server.client.get("/healthz").status_code == 200


def test_readyz_says_when_another_process_re_embedded_the_store(
    server: Server, make_memory, make_embedder
):
    """After `membot reindex` elsewhere every search was a 409 while /readyz said 200."""
    server.memory.add("I keep bees.", user="ana", thread="t")
    other = make_memory(make_embedder(name="hash-other", dimension=128))
    other.reindex(other.embedder)
    answer = server.client.get("/readyz")
    assert answer.status_code == 503
    said = _error(answer)
    assert said["type"] == "embedder_mismatch" and "reindex" in said["message"]


def test_health_openapi_and_docs_answer(server: Server):
    assert server.client.get("/healthz").json() == {"status": "ok"}
    assert server.client.get("/readyz").json() == {"status": "ok"}
    schema = server.client.get("/openapi.json").json()
    assert "/v1/bots/{bot}/turns" in schema["paths"]
    assert "swagger" in server.client.get("/docs").text.lower()


def test_requests_without_a_good_key_get_401(server: Server):
    assert _error(server.client.get("/v1/bots"))["type"] == "unauthorized"
    wrong = server.client.get("/v1/bots", headers={"Authorization": "Bearer mb_nonsense"})
    assert wrong.status_code == 401
    key = create_key(server.memory, admin=True)
    revoke_key(server.memory, key.key.id)
    revoked = server.client.get("/v1/bots", headers=server.as_key(key.secret))
    assert revoked.status_code == 401 and "revoked" in _error(revoked)["message"]


def test_the_strategies_a_bot_may_use_are_listed_with_their_options(server: Server, admin):
    assert _error(server.client.get("/v1/strategies"))["type"] == "unauthorized"
    listed = server.client.get("/v1/strategies", headers=admin).json()["strategies"]
    assert list(listed)[:7] == ["lines", "hybrid", "blend", "bm25", "prune", "pairs", "windows"]
    assert listed["blend"]["lexical_weight"] == 0.5 and listed["pairs"] == {}


def test_an_admin_builds_bots_and_others_see_only_theirs(server: Server, admin):
    made = server.client.post(
        "/v1/bots", json={"name": "coach", "settings": {"bot_name": "Cy"}}, headers=admin
    )
    assert made.status_code == 201 and made.json()["settings"]["bot_name"] == "Cy"
    again = server.client.post("/v1/bots", json={"name": "coach"}, headers=admin)
    assert again.status_code == 409 and _error(again)["type"] == "conflict"
    server.client.post("/v1/bots", json={"name": "other"}, headers=admin)
    bad = server.client.post(
        "/v1/bots", json={"name": "x", "settings": {"threshold": 7}}, headers=admin
    )
    assert bad.status_code == 400 and "threshold" in _error(bad)["message"]

    bot_key = server.as_key(server.key(bot="coach"))
    assert server.client.get("/v1/bots", headers=admin).json() == {"bots": ["coach", "other"]}
    assert server.client.get("/v1/bots", headers=bot_key).json() == {"bots": ["coach"]}
    assert server.client.get("/v1/bots/other", headers=bot_key).status_code == 404
    assert server.client.post("/v1/bots", json={"name": "z"}, headers=bot_key).status_code == 403
    assert server.client.get("/v1/bots/nobody", headers=admin).status_code == 404
    # An admin's mistyped bot started a new one with the line in it (as OpenAI's route does
    # not): now a 404, and nothing is stored.
    typo = {"user": "sam", "thread": "t", "text": "hello"}
    assert server.client.post("/v1/bots/coahc/turns", json=typo, headers=admin).status_code == 404
    tool = {"user": "sam", "thread": "t", "name": "clock", "text": "9:00"}
    answer = server.client.post("/v1/bots/coahc/tool-results", json=tool, headers=admin)
    assert answer.status_code == 404 and "coahc" in _error(answer)["message"]
    assert "membot bot list" not in _error(answer)["message"]  # a command line is not there
    lines = {"file": ("lines.jsonl", b'{"user": "sam", "text": "hi"}')}
    answer = server.client.post("/v1/bots/coahc/import", files=lines, headers=admin)
    assert answer.status_code == 404
    notes = {"files": ("notes.txt", b"Stretch.")}
    answer = server.client.post("/v1/bots/coahc/documents", files=notes, headers=admin)
    assert answer.status_code == 404
    assert server.memory.bots() == ["coach", "other"] and server.memory.count_lines() == 0


def test_bot_settings_change_by_builders_only_and_the_model_by_admins_only(server: Server, admin):
    server.client.post("/v1/bots", json={"name": "coach"}, headers=admin)
    bot_key = server.as_key(server.key(bot="coach"))
    person_key = server.as_key(server.key(bot="coach", user="sam"))
    changed = server.client.patch("/v1/bots/coach", json={"threshold": 0.4}, headers=bot_key)
    assert changed.status_code == 200 and changed.json()["settings"]["threshold"] == 0.4
    assert (
        server.client.patch(
            "/v1/bots/coach", json={"threshold": 0.5}, headers=person_key
        ).status_code
        == 403
    )
    model = server.client.patch(
        "/v1/bots/coach",
        json={"llm": "openai:x@http://elsewhere", "llm_key_env": "HOME"},
        headers=bot_key,
    )
    assert model.status_code == 403 and "admin" in _error(model)["message"]
    assert server.memory.bot_settings("coach").llm == ""
    # What a profile would change counts, not what it names: a bot key's profile without
    # the admin's model cleared it, and its own profile sent back was refused.
    chosen = {"llm": "openai:x@http://elsewhere", "llm_key_env": "HOME"}
    assert server.client.patch("/v1/bots/coach", json=chosen, headers=admin).status_code == 200
    cleared = server.client.put(
        "/v1/bots/coach/profile", content=b'[profile]\nbot_name = "Cy"\n', headers=bot_key
    )
    assert cleared.status_code == 403 and "llm, llm_key_env" in _error(cleared)["message"]
    assert server.memory.bot_settings("coach").llm == chosen["llm"]
    own = server.client.get("/v1/bots/coach/profile", headers=bot_key).text
    resent = server.client.put(
        "/v1/bots/coach/profile", content=own.replace("0.4", "0.45").encode(), headers=bot_key
    )
    assert resent.status_code == 200 and resent.json()["settings"]["threshold"] == 0.45
    assert server.memory.bot_settings("coach").llm_key_env == "HOME"
    as_before = server.client.patch("/v1/bots/coach", json={"llm": chosen["llm"]}, headers=bot_key)
    assert as_before.status_code == 200
    unknown = server.client.patch("/v1/bots/coach", json={"speed": 3}, headers=admin)
    assert unknown.status_code == 400 and "unknown bot setting" in _error(unknown)["message"]


def test_profiles_travel_as_toml(server: Server, admin):
    server.client.post(
        "/v1/bots", json={"name": "coach", "settings": {"bot_name": "Cy"}}, headers=admin
    )
    toml = server.client.get("/v1/bots/coach/profile", headers=admin)
    assert toml.headers["content-type"].startswith("application/toml") and "Cy" in toml.text
    copied = server.client.put("/v1/bots/copy/profile", content=toml.text.encode(), headers=admin)
    assert copied.status_code == 200 and copied.json()["settings"]["bot_name"] == "Cy"
    broken = server.client.put("/v1/bots/copy/profile", content=b"name = [", headers=admin)
    assert broken.status_code == 400


def test_a_turn_answers_with_the_whole_trace(server: Server, admin):
    server.memory.create_bot("coach")
    server.llm.enqueue('{"response": "Hello Sam", "citation_ids": []}')
    turn = server.client.post(
        "/v1/bots/coach/turns",
        json={"user": "sam", "thread": "t1", "text": "Hi, I'm Sam"},
        headers=admin,
    )
    assert turn.status_code == 200, turn.text
    trace = turn.json()
    assert trace["response"] == "Hello Sam"
    for key in ("citations", "feed", "history_matches", "prompt", "timings_ms", "tokens"):
        assert key in trace
    lines = server.memory.history(user="sam", bot="coach")
    assert [line.text for line in lines] == ["Hi, I'm Sam", "Hello Sam"]


def test_a_person_key_talks_only_as_its_person(server: Server):
    key = server.as_key(server.key(bot="coach", user="sam"))
    dry = server.client.post(
        "/v1/bots/coach/turns",
        json={"thread": "t1", "text": "I like tea", "dry_run": True},
        headers=key,
    )
    assert dry.status_code == 200 and dry.json()["response"] == ""
    assert server.memory.history(user="sam", bot="coach")[0].text == "I like tea"
    other = server.client.post(
        "/v1/bots/coach/turns", json={"user": "kim", "thread": "t1", "text": "hi"}, headers=key
    )
    assert other.status_code == 403
    settings = server.client.post(
        "/v1/bots/coach/turns",
        json={"thread": "t1", "text": "hi", "settings": {"share_across_people": True}},
        headers=key,
    )
    assert settings.status_code == 403
    elsewhere = server.client.post(
        "/v1/bots/other/turns", json={"thread": "t", "text": "hi"}, headers=key
    )
    assert elsewhere.status_code == 404
    assert server.memory.history(user="kim") == []


def test_a_turn_needs_a_person_with_admin_and_bot_keys(server: Server, admin):
    missing = server.client.post(
        "/v1/bots/coach/turns", json={"thread": "t", "text": "hi"}, headers=admin
    )
    assert missing.status_code == 422 and "user" in _error(missing)["message"]


def test_when_the_model_fails_the_line_is_stored_once_and_503_says_so(server: Server, admin):
    server.memory.create_bot("coach")
    server.llm.enqueue("!error the model is down")
    failed = server.client.post(
        "/v1/bots/coach/turns",
        json={"user": "sam", "thread": "t1", "text": "Are you there?"},
        headers=admin,
    )
    assert failed.status_code == 503
    error = _error(failed)
    assert error["type"] == "llm_unavailable" and "stored" in error["message"]
    assert error["stored"] == {"thread": "t1", "seq": 1}
    assert failed.headers["x-should-retry"] == "false"  # a retry would store the line again
    assert [line.text for line in server.memory.history(user="sam")] == ["Are you there?"]


def test_a_bad_setting_fails_before_the_line_is_stored(server: Server, admin):
    server.memory.create_bot("coach")
    bad = server.client.post(
        "/v1/bots/coach/turns",
        json={"user": "sam", "thread": "t1", "text": "hello", "settings": {"threshold": "x"}},
        headers=admin,
    )
    assert bad.status_code == 400
    assert server.memory.history(user="sam") == []


def test_tool_results_search_threads_and_lines(server: Server, admin):
    for text in ("I live in Lisbon", "I have a cat"):
        server.memory.add(text, user="sam", thread="t1", bot="coach")
    server.memory.add("I live in Oslo", user="kim", thread="k1", bot="coach")
    tool = server.client.post(
        "/v1/bots/coach/tool-results",
        json={"user": "sam", "thread": "t1", "name": "weather", "text": "Lisbon: 21 °C"},
        headers=admin,
    )
    assert tool.status_code == 201 and tool.json()["role"] == "tool"

    sam = server.as_key(server.key(bot="coach", user="sam"))
    found = server.client.get(
        "/v1/bots/coach/search", params={"q": "where do I live"}, headers=sam
    ).json()["matches"]
    assert {match["user"] for match in found} == {"sam"}
    everyone = server.client.get(
        "/v1/bots/coach/search", params={"q": "live", "k": 5}, headers=admin
    ).json()["matches"]
    assert {match["user"] for match in everyone} == {"sam", "kim"}
    blank = server.client.get(  # empty parameters are none given, as HTTP forms send them
        "/v1/bots/coach/search", params={"q": "live", "k": 5, "thread": "", "user": ""},
        headers=admin,
    )  # fmt: skip
    assert blank.status_code == 200 and blank.json()["matches"] == everyone
    spaces = server.client.get("/v1/bots/coach/search", params={"q": "   "}, headers=admin)
    assert spaces.status_code == 400 and "nothing to search for" in spaces.text

    threads = server.client.get("/v1/bots/coach/users/sam/threads", headers=sam).json()
    assert [(t["thread"], t["lines"]) for t in threads["threads"]] == [("t1", 3)]
    page = server.client.get(
        "/v1/bots/coach/users/sam/threads/t1/lines",
        params={"after_seq": 1, "limit": 1},
        headers=sam,
    ).json()
    assert [line["text"] for line in page["lines"]] == ["I have a cat"]
    past_any_seq = server.client.get(  # answered 500 (SQLite holds 64 bits)
        "/v1/bots/coach/users/sam/threads/t1/lines", params={"after_seq": 2**64}, headers=sam
    )
    assert (
        past_any_seq.status_code == 422 and "after_seq" in past_any_seq.json()["error"]["message"]
    )
    theirs = server.client.get("/v1/bots/coach/users/kim/threads/k1/lines", headers=sam)
    assert theirs.status_code == 403 and "Oslo" not in theirs.text
    missing = server.client.get("/v1/bots/coach/users/sam/threads/zz/lines", headers=sam)
    assert missing.status_code == 404


def test_ending_remembering_and_forgetting(server: Server, admin):
    server.memory.add("I was born in March", user="sam", thread="t1", bot="coach")
    server.llm.enqueue(json.dumps({"points": ["Sam was born in March."], "categories": ["events"]}))
    server.llm.enqueue(json.dumps({"decision": "keep", "points": ["Sam was born in March."]}))
    ended = server.client.post(
        "/v1/bots/coach/users/sam/threads/t1/end", json={"remember": False}, headers=admin
    )
    assert ended.status_code == 200 and ended.json()["remembered"] is None
    memories = server.client.get("/v1/bots/coach/users/sam/memories", headers=admin).json()
    assert memories == {"memories": []}
    gone = server.client.delete("/v1/bots/coach/users/sam/threads/t1", headers=admin)
    assert gone.status_code == 200 and gone.json()["lines"] == 1
    assert (
        server.client.delete("/v1/bots/coach/users/sam/threads/t1", headers=admin).status_code
        == 404
    )
    server.memory.add("again", user="sam", thread="t2", bot="coach")
    everything = server.client.delete("/v1/bots/coach/users/sam", headers=admin)
    assert everything.json()["lines"] == 1 and server.memory.history(user="sam") == []


def test_documents_upload_list_and_remove(server: Server, admin):
    bot_key = server.as_key(server.key(bot="coach"))
    files = [("files", ("plan.md", b"# Plan\nRun slowly on Sundays.\n", "text/markdown"))]
    added = server.client.post("/v1/bots/coach/documents", files=files, headers=bot_key)
    assert added.status_code == 201 and added.json()["documents"][0]["name"] == "plan.md"
    bad = [
        ("files", ("good.md", b"# Good\ntext\n", "text/markdown")),
        ("files", ("broken.pdf", b"not a pdf at all", "application/pdf")),
    ]
    refused = server.client.post("/v1/bots/coach/documents", files=bad, headers=bot_key)
    assert refused.status_code == 400 and "broken.pdf" in _error(refused)["message"]
    listed = server.client.get("/v1/bots/coach/documents", headers=bot_key).json()
    assert [doc["name"] for doc in listed["documents"]] == ["plan.md"]
    person = server.as_key(server.key(bot="coach", user="sam"))
    assert (
        server.client.delete("/v1/bots/coach/documents/plan.md", headers=person).status_code == 403
    )
    assert server.client.delete("/v1/bots/coach/documents/plan.md", headers=bot_key).json() == {
        "removed": "plan.md"
    }
    assert (
        server.client.delete("/v1/bots/coach/documents/plan.md", headers=bot_key).status_code == 404
    )


def test_import_takes_jsonl_of_this_bot_only(server: Server, admin):
    server.memory.create_bot("coach")
    good = "\n".join(json.dumps({"user": "sam", "thread": "old", "text": t}) for t in "abc")
    done = server.client.post(
        "/v1/bots/coach/import", files={"file": ("lines.jsonl", good.encode())}, headers=admin
    )
    assert done.status_code == 201
    assert done.json() == {"imported": 3, "threads": 1, "already_stored": 0}
    # Sent again with one more line: only that line is new, and the answer says so (it said
    # "imported: 1" and nothing of the three it left out).
    more = good + "\n" + json.dumps({"user": "sam", "thread": "old", "text": "d"})
    again = server.client.post(
        "/v1/bots/coach/import", files={"file": ("lines.jsonl", more.encode())}, headers=admin
    )
    assert again.json() == {"imported": 1, "threads": 1, "already_stored": 3}
    stranger = json.dumps({"user": "sam", "thread": "x", "text": "hi", "bot": "other"})
    refused = server.client.post(
        "/v1/bots/coach/import", files={"file": ("x.jsonl", stranger.encode())}, headers=admin
    )
    assert refused.status_code == 403
    broken = server.client.post(
        "/v1/bots/coach/import",
        files={"file": ("y.jsonl", b'{"user": "sam"}\nnot json')},
        headers=admin,
    )
    assert broken.status_code == 400 and "y.jsonl:1" in _error(broken)["message"]
    assert server.memory.count_lines() == 4


def test_malformed_requests_get_json_errors_not_500(server: Server, admin):
    server.memory.create_bot("coach")
    not_json = server.client.post(
        "/v1/bots/coach/turns",
        content=b"{oops",
        headers={**admin, "content-type": "application/json"},
    )
    assert not_json.status_code == 422 and _error(not_json)["type"] == "invalid_request"
    assert _error(server.client.get("/v1/nowhere", headers=admin))["type"] == "not_found"
    assert server.client.put("/v1/bots", headers=admin).status_code == 405
    huge = server.client.post(
        "/v1/bots/coach/turns",
        json={"user": "sam", "thread": "t", "text": "x" * (MAX_LINE_CHARS + 1)},
        headers=admin,
    )
    assert huge.status_code == 413 and _error(huge)["type"] == "too_large"
    negative = server.client.get("/v1/bots/coach/search", params={"q": "a", "k": -1}, headers=admin)
    assert negative.status_code == 422


def test_a_key_past_its_rate_limit_gets_429_with_retry_after(memory: Memory):
    from fastapi.testclient import TestClient

    app = create_app(memory, llm=ScriptedLLM(), rate_limit=2)
    key = {"Authorization": f"Bearer {create_key(memory, admin=True).secret}"}
    with TestClient(app) as client:
        assert [client.get("/v1/bots", headers=key).status_code for _ in range(2)] == [200, 200]
        limited = client.get("/v1/bots", headers=key)
        assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
        other = {"Authorization": f"Bearer {create_key(memory, admin=True).secret}"}
        assert client.get("/v1/bots", headers=other).status_code == 200


def test_metrics_count_turns_errors_and_step_latencies(server: Server, admin):
    server.memory.create_bot("coach")
    server.client.post(
        "/v1/bots/coach/turns",
        json={"user": "sam", "thread": "t", "text": "hello", "dry_run": True},
        headers=admin,
    )
    server.client.get("/v1/bots")
    text = server.client.get("/metrics").text
    assert 'membot_turns_total{bot="coach",outcome="answered",pid=' in text
    assert 'type="unauthorized"} 1.0' in text
    for step in ("embed", "search", "assemble", "memory_total"):
        assert f'step="{step}"}} 1.0' in text  # one observation in the step's histogram
    assert 'route="/v1/bots",status="401"} 1.0' in text
