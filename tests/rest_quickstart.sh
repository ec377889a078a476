# The README's REST quick start (README.md, "REST sessions"), exactly: tests/test_lab_script.py
# runs it after lab.sh's export line, as a user pastes both in a terminal.
H="Authorization: token $JUPYTER_TOKEN"
SID=$(curl -sS -X POST -H "$H" $URL/jupyter-ci/sessions | tee /dev/stderr | sed -n 's/.*"id": "\([0-9a-f]*\)".*/\1/p'); echo
S=$URL/jupyter-ci/sessions/${SID:?no session, see the reply above}
curl -sS -X POST -H "$H" $S/execute -d '{"code": "x = 6 * 7\nx"}'; echo
curl -sS -N -X POST -H "$H" $S/ask -d '{"prompt": "What is x squared?"}'
curl -sS -X DELETE -H "$H" $S
