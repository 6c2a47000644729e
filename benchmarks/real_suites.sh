#!/usr/bin/env bash
# Third-party suites plainly and under --compile-accuracy; see real_suites.py (--help).
exec python3 "$(dirname "$0")/real_suites.py" "$@"
