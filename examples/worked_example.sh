#!/usr/bin/env bash
# A bot with a profile, expertise and a remember-policy, over two threads (docs/bots.md's worked example).
# The LLM's replies are scripted (examples/worked_example_replies.json) so that the output is
# the same on every machine; give a real model in LLM to talk for real, e.g.
#   LLM=openai:gpt-4o-mini examples/worked_example.sh
set -euo pipefail
cd "$(dirname "$0")/.."
MEMBOT="${MEMBOT:-.venv/bin/membot}"
export MEMBOT_DB="${MEMBOT_DB:-$(mktemp -d)/example.db}"
if [[ -z "${LLM:-}" ]]; then  # the scripted fake takes its replies from a copy of the file
    replies="$(mktemp)"; cp examples/worked_example_replies.json "$replies"; LLM="script:$replies"
fi
run() { echo "\$ membot $*" >&2; "$MEMBOT" --llm "$LLM" "$@"; }
# The birthday turn's trace goes to the file in OUT when one is given, else with the rest
# (a second descriptor: reopening /dev/stdout would truncate a file it is redirected to).
if [[ -n "${OUT:-}" ]]; then exec 3>"$OUT"; else exec 3>&1; fi

run bot create barista --bot-name Bea --human-name Sam
run bot set barista remember_policy "Never keep health details."
run expertise add --bot barista examples/espresso.md

run say "Hi, I'm Sam. My birthday is on 14 March and I love flat whites." \
    --bot barista --user sam --thread monday
run say "I can't have much caffeine because of my heart condition." \
    --bot barista --user sam --thread monday
run end --bot barista --user sam --thread monday --remember yes
run memories --user sam --bot barista --json

run say "Hi Bea, it's Sam again." --bot barista --user sam --thread friday
run say "How many days until my birthday?" --bot barista --user sam --thread friday --json \
    >&3
run say "How fine should I grind for a flat white?" --bot barista --user sam --thread friday --json
