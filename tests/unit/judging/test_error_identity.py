"""The identity of a compile failure is the same whether Inductor's compile workers compiled the
kernel or this process did: on torch 2.11 on an H100 the injected Triton compile error was
recorded as raised in a worker ("SubprocException: An exception occurred in a subprocess:") and
then, in the repro's check, raised in process ("RuntimeError: Failed to import ..."), so the
repro was taken as failing differently and never minified."""

from __future__ import annotations

from pytest_torchcompile.judging.rule import error_signature, normalized_error


class InductorError(Exception):
    """Stands for torch._inductor.exc.InductorError: its message is its inner error's."""


IN_PROCESS = InductorError(
    "RuntimeError: Failed to import /tmp/torchinductor_root/12/cdef.py\n"
    "SyntaxError: invalid syntax (cdef.py, line 20)"
)
IN_A_WORKER = InductorError(
    "SubprocException: An exception occurred in a subprocess:\n\nName=compile\n"
    "Traceback (most recent call last):\n"
    '  File "subproc_pool.py", line 457, in do_job\n    result = job()\n'
    "RuntimeError: Failed to import /tmp/torchinductor_root/35/cabc.py\n"
    "SyntaxError: invalid syntax (cabc.py, line 20)\n"
)


def test_a_compile_error_raised_in_a_worker_is_named_by_the_error_the_worker_raised() -> None:
    assert (
        error_signature(IN_A_WORKER)
        == "InductorError: RuntimeError: Failed to import /tmp/torchinductor_root/35/cabc.py"
    )
    assert normalized_error(error_signature(IN_A_WORKER)) == normalized_error(
        error_signature(IN_PROCESS)
    )


def test_the_last_of_chained_tracebacks_names_the_error() -> None:
    chained = RuntimeError(
        "job failed\nTraceback (most recent call last):\n  File \"a.py\", line 1\nKeyError: 'x'\n\n"
        "During handling of the above exception, another exception occurred:\n\n"
        'Traceback (most recent call last):\n  File "b.py", line 2\nValueError: bad value\n'
    )
    assert error_signature(chained) == "RuntimeError: ValueError: bad value"


def test_an_error_without_a_traceback_is_named_by_its_first_line() -> None:
    assert error_signature(ValueError("first\nsecond")) == "ValueError: first"
    assert error_signature(ValueError("")) == "ValueError: "
    assert error_signature(ValueError("a long message"), max_chars=6) == "ValueError: a long"


def test_a_worker_names_the_class_with_its_module_and_this_process_without() -> None:
    in_a_worker = InductorError(
        "SubprocException: An exception occurred in a subprocess:\n\nName=compile\n"
        'Traceback (most recent call last):\n  File "cpp_builder.py", line 9, in build\n'
        "torch._inductor.exc.CppCompileError: C++ compile error\n"
    )
    in_process = InductorError("CppCompileError: C++ compile error")
    assert (
        error_signature(in_a_worker)
        == error_signature(in_process)
        == "InductorError: CppCompileError: C++ compile error"
    )
