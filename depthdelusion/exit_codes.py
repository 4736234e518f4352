"""Exit codes of the `depthdelusion` command (listed in `depthdelusion --help`)."""

OK = 0
#: The command ran, and its answer is no: a sweep with failed runs, a plan that does not fit.
FAILED = 1
#: Bad command line, configuration or input; one line on stderr says which field, file or flag.
USAGE = 2
#: EX_TEMPFAIL: saved on SIGTERM (preemption); run the same command again to resume.
PREEMPTED = 75
#: Interrupted (Ctrl-C, SIGINT), as a shell reports it (128 + 2): one line, no traceback; a
#: report is written whole or not at all.
INTERRUPTED = 130
#: The reader of standard output went away (`depthdelusion tables list | head`), as a shell
#: reports SIGPIPE (128 + 13): nothing more is printed.
BROKEN_PIPE = 141
