"""REST for a person's own memory: seen, searched, a line or key point deleted, a key point
corrected; a person key reaches its own person only, and another person's ids are 404."""

from __future__ import annotations

from conftest import Server

from membot import Memory

POINTS = "- 2026-05-01: ana said: My cat is called Miso.\n- 2026-05-01: ana said: I row."
BASE = "/v1/bots/coach/users"


def fill(memory: Memory) -> int:
    memory.add("My cat is called Miso", user="ana", thread="cats", bot="coach")
    memory.add("I row on Sundays", user="ana", thread="sport", bot="coach")
    memory.add("My dog is called Rex", user="bo", thread="dogs", bot="coach")
    return memory.add_summary(bot="coach", user="ana", thread="cats", text=POINTS).id


def test_a_person_key_sees_searches_deletes_and_corrects_its_own_memory(server: Server) -> None:
    summary_id = fill(server.memory)
    ana = server.as_key(server.key(bot="coach", user="ana"))

    seen = server.client.get(f"{BASE}/ana/memory", headers=ana).json()
    assert [thread["thread"] for thread in seen["threads"]] == ["cats", "sport"]
    assert [point["text"] for point in seen["key_points"]] == [
        "2026-05-01: ana said: My cat is called Miso.",
        "2026-05-01: ana said: I row.",
    ]
    found = server.client.get(f"{BASE}/ana/memory", params={"q": "SUNDAYS"}, headers=ana).json()
    assert [t["thread"] for t in found["threads"]] == ["sport"] and found["key_points"] == []

    point = f"{BASE}/ana/key-points/{summary_id}/0"
    corrected = server.client.put(point, json={"text": "My cat is called Luna."}, headers=ana)
    assert corrected.status_code == 200
    assert corrected.json()["corrected"]["corrections"][0]["old"].endswith("Miso.")
    assert "Luna" in server.memory.summaries(user="ana")[0].text

    gone = server.client.delete(f"{BASE}/ana/key-points/{summary_id}/1", headers=ana)
    assert gone.status_code == 200 and gone.json()["forgotten"]["text"].endswith("I row.")

    line_id = seen["threads"][1]["lines"][0]["id"]
    deleted = server.client.delete(f"{BASE}/ana/lines/{line_id}", headers=ana)
    assert deleted.status_code == 200 and deleted.json()["forgotten"]["text"] == "I row on Sundays"
    assert server.memory.history(user="ana", thread="sport") == []
    again = server.client.delete(f"{BASE}/ana/lines/{line_id}", headers=ana)
    assert again.status_code == 404


def test_another_persons_memory_is_out_of_a_person_keys_reach(server: Server) -> None:
    summary_id = fill(server.memory)
    bo = server.as_key(server.key(bot="coach", user="bo"))
    (ana_line, *_) = server.memory.history(user="ana")

    # Through ana's path: refused as another person.
    assert server.client.get(f"{BASE}/ana/memory", headers=bo).status_code == 403
    assert server.client.delete(f"{BASE}/ana/lines/{ana_line.id}", headers=bo).status_code == 403
    # Through bo's own path, ana's ids are not found, and the answer names nothing of hers.
    for answer in (
        server.client.delete(f"{BASE}/bo/lines/{ana_line.id}", headers=bo),
        server.client.delete(f"{BASE}/bo/key-points/{summary_id}/0", headers=bo),
        server.client.put(f"{BASE}/bo/key-points/{summary_id}/0", json={"text": "x"}, headers=bo),
    ):
        assert answer.status_code == 404
        assert "ana" not in answer.text and "Miso" not in answer.text
    assert len(server.memory.history(user="ana")) == 2
    assert "Miso" in server.memory.summaries(user="ana")[0].text
    # A key of another bot does not see this one.
    other = server.as_key(server.key(bot="elsewhere", user="bo"))
    assert server.client.get(f"{BASE}/bo/memory", headers=other).status_code == 404


def test_a_bot_key_reaches_any_person_of_its_bot(server: Server) -> None:
    fill(server.memory)
    coach = server.as_key(server.key(bot="coach"))
    (line,) = server.memory.history(user="bo")
    answer = server.client.delete(f"{BASE}/bo/lines/{line.id}", headers=coach)
    assert answer.status_code == 200 and server.memory.history(user="bo") == []
    empty = server.client.put(f"{BASE}/ana/key-points/1/0", json={"text": ""}, headers=coach)
    assert empty.status_code == 422
