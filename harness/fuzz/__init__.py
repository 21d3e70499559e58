"""A mutation fuzzer for the broker's wire protocol: real frames in, hostile frames out.

Shared by the CI test (tests/hardening/test_fuzz.py), the long run (tools/fuzz.py) and
bench/hostile.py.

1. Capture (corpus.py): real clients' request frames, recorded through a loopback proxy.
2. Mutate (mutation.py): a pure function of (corpus, seed, index).
3. Run (campaign.py): a broker in a child process under many concurrent connections.
4. Afterwards (triage.py, run.py): the broker is alive, kept its data and serves a real
   client; a death, a hang or a logged ERROR is replayed to name the frame behind it.
"""
