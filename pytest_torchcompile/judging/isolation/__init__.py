"""Judge minifier candidates in a warm child process, or in this one.

A candidate can crash the process that compiles and runs it (a segfault or an abort in generated
code), hang, or leave the CUDA context unusable. Judged in a child, each of those costs a restart
instead of the pytest session: the child imports torch and Inductor once, then judges every
candidate of a case, so Inductor's one-time costs are paid once; a death is classified as
``CRASHED``, a hang as ``TIMED_OUT``, and the next candidate gets a fresh child.

``protocol`` holds the messages between the two, ``parent`` the judges (:class:`IsolatedJudge`,
:class:`InProcessJudge`), ``child`` the child's loop, ``tasks`` what either does with a candidate,
``config`` the Inductor config and setup modules a judging process applies.
"""
