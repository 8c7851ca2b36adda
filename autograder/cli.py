"""`autograder` / `python -m autograder`: the instructor's commands, each a thin layer over a module.

    release [ASSIGNMENT ... | --all] [--provided gated|force|none] [--no-exchange]
                                          autograder.publish.release.release (nbgrader generate_assignment + exercises/;
                                          provided.py of 04 on only once the notebooks it covers are past due;
                                          then nbgrader release_assignment when the course has an exchange)
    collect PATH | ASSIGNMENT             autograder.submissions.collect     (folder or zip -> submitted/; an
                                          assignment: from the course's exchange, autograder.submissions.exchange)
    grade ASSIGNMENT [--student S ...]    autograder.grade.engine (Dask; --workers N | --scheduler ADDRESS; --force)
    feedback [ASSIGNMENT]                 autograder.publish.feedback    (nbgrader generate_feedback, HTML)
    export [--to F] [--format csv|canvas|moodle]  autograder.publish.export (nbgrader CSV + flags; LMS gradebook imports)
    report [ASSIGNMENT]                   autograder.publish.report      (HTML + PNG; no ASSIGNMENT: the course page)
    similarity ASSIGNMENT                 autograder.publish.similarity  (copied work: ranked pairs, heat map, CSV)
    demo                                  autograder.demo.run        (sample class, whole pipeline)

Common options: --course-dir (default $AUTOGRADER_COURSE_DIR, else the current folder when it holds
nbgrader_config.py, else the repository's course/), --db (SQLAlchemy URL; default $AUTOGRADER_DB, else the
course config's CourseDirectory.db_url, else sqlite gradebook.db in the course root).

Exit status: 0 when done, 1 when the instructor must act (files skipped by collect, submissions held for review
or failed, students refused by `Autograde.create_student = False`, a step failed), 2 for a usage error or when
the autograder refuses the command before it does anything (an `AutograderError`: unknown assignment, no jail
...); either way the reason is one line on stderr, `autograder <command>: <message>`.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autograder.course.coursedir import alembic_on_path, assignments_in_source, command_course_dir
from autograder.course.provided import provided_range
from autograder.errors import AutograderError

OK, ACT, USAGE = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--course-dir", type=Path, default=None,
                        help="nbgrader course root (default: $AUTOGRADER_COURSE_DIR, else the current folder if it "
                             "holds nbgrader_config.py, else the repository's course/)")
    common.add_argument("--db", default=None,
                        help="gradebook SQLAlchemy URL (default: $AUTOGRADER_DB, else the course config's "
                             "CourseDirectory.db_url, else sqlite in the course root)")
    parser = argparse.ArgumentParser(prog="autograder", description="Grade the transformers101 course.")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (_add_release, _add_intake_and_grading, _add_publishing, _add_demo):
        add(sub, common)
    return parser


def _add_release(sub, common) -> None:
    """The release command: the student version of assignments."""
    p = sub.add_parser(
        "release", parents=[common], help="generate the student version of assignments",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="nbgrader generate_assignment into <course>/release/ and a copy into exercises/.",
        epilog=f"provided.py ({provided_range()}: the reference of every earlier notebook) is gated: with "
               "--provided gated (the\n"
               "default) it reaches the release only once EVERY assignment it covers is past its due date in the\n"
               "gradebook (nbgrader db assignment add NAME --duedate ...; no due date counts as open); until then\n"
               "the release has no provided.py and says when to release again. --provided force releases it now\n"
               "and names each not-yet-due assignment whose reference that reveals; --provided none never does.\n"
               "Grading always has it (the grader generates it from solutions/).")
    p.add_argument("assignment", nargs="*", help="assignment name(s), or --all")
    p.add_argument("--all", action="store_true", help="every assignment in source/")
    p.add_argument("--provided", choices=("gated", "force", "none"), default="gated",
                   help=f"provided.py of {provided_range()}: gated (default), force (reveal now), none (never)")
    p.add_argument("--no-exchange", action="store_true",
                   help="only write release/ and exercises/, even where the course has an nbgrader exchange "
                        "(c.Exchange.root): by default the release is also handed to the students through it")


def _add_intake_and_grading(sub, common) -> None:
    """collect and grade: submissions in, grades out."""
    p = sub.add_parser("collect", parents=[common], help="import submissions from a folder, a zip or the exchange",
                       description="PATH: a folder or zip of submissions (nbgrader layout or an LMS download). "
                                   "ASSIGNMENT (no such folder or zip): the latest submission of each student from "
                                   "the course's nbgrader exchange (c.Exchange.root), as nbgrader collect chooses "
                                   "it; the same rules apply to both.")
    p.add_argument("path", type=Path, metavar="PATH|ASSIGNMENT")

    p = sub.add_parser("grade", parents=[common], help="autograde an assignment in parallel")
    p.add_argument("assignment")
    p.add_argument("--student", action="append", default=None, help="only this student (repeatable)")
    p.add_argument("--workers", type=int, default=None, help="local worker processes (default: CPU cores)")
    p.add_argument("--scheduler", default=None, help="address of a running Dask scheduler, e.g. tcp://host:8786")
    p.add_argument("--force", action="store_true", help="regrade submissions that did not change")
    p.add_argument("--cell-timeout", type=float, default=None,
                   help="seconds per cell (default: the course config's Execute.timeout)")
    p.add_argument("--notebook-timeout", type=float, default=None,
                   help="seconds per notebook (default: the course config's SandboxLimits.notebook_timeout)")
    p.add_argument("--memory-gb", type=float, default=None,
                   help="memory cap of a submission in GiB (default: the course config's SandboxLimits.memory_bytes)")
    p.add_argument("--allow-unenforced-limits", action="store_true", default=None,
                   help="grade even where this machine cannot enforce the per-submission limits (no cgroups: the "
                        "total memory and CPU of a submission uncapped, time limits in wall-clock time); said in one "
                        "line. Default: refuse (c.SandboxLimits.allow_unenforced)")


def _add_publishing(sub, common) -> None:
    """feedback, export, report and similarity: what the grades become."""
    p = sub.add_parser("feedback", parents=[common], help="per-student HTML feedback")
    p.add_argument("assignment", nargs="?")

    p = sub.add_parser("export", parents=[common], help="grades as CSV (nbgrader's, or an LMS gradebook import)")
    from autograder.publish.export import FORMATS

    p.add_argument("--to", default=None, help="output file (default: "
                   + ", ".join(f"{fmt.default_name} for {name}" for name, fmt in FORMATS.items()) + ")")
    p.add_argument("--format", choices=tuple(FORMATS), default="csv",
                   help="; ".join(f"{name}: {fmt.help}" for name, fmt in FORMATS.items()))

    p = sub.add_parser("report", parents=[common], help="class report (HTML)")
    p.add_argument("assignment", nargs="?")

    p = sub.add_parser("similarity", parents=[common], help="copied work: pairwise similarity of solution cells")
    p.add_argument("assignment")
    p.add_argument("--threshold", type=float, default=None, help="share of a student's code found in another's "
                   "(default 0.6)")
    p.add_argument("--min-overlap", type=int, default=None, help="shared filtered characters (default 60)")
    p.add_argument("--include-reference", action="store_true",
                   help="also ignore the reference solution (for exercises with essentially one way to write them)")


def _add_demo(sub, common) -> None:
    """The demo: a sample class through the whole pipeline."""
    p = sub.add_parser("demo", help="build a sample class and run the whole pipeline on it")
    p.add_argument("--assignments", nargs="*", default=None, help="default: every assignment in course/source")
    p.add_argument("--students", type=int, default=6, help="class size (at least 6)")
    p.add_argument("--output", type=Path, default=None, help="demo folder (default: demo_output/)")
    p.add_argument("--workers", type=int, default=None)


def _limit_overrides(args) -> dict:
    """This run's overrides of the course's limits (the engine resolves the limits once, with them)."""
    from autograder.course.units import GiB

    overrides = {"cell_timeout": args.cell_timeout, "notebook_timeout": args.notebook_timeout,
                 "memory_bytes": None if args.memory_gb is None else int(args.memory_gb * GiB)}
    return {name: value for name, value in overrides.items() if value is not None}


def main(argv=None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    alembic_on_path()  # every command may open (so create) the course's gradebook
    course_dir = getattr(args, "course_dir", None)
    course_dir = (course_dir or command_course_dir()).resolve()
    try:
        return COMMANDS[args.command](args, course_dir)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return ACT
    except AutograderError as exc:
        print(f"autograder {args.command}: {_one_line(exc)}", file=sys.stderr)
        return USAGE
    except (FileNotFoundError, ValueError, RuntimeError) as exc:
        print(f"autograder {args.command}: {exc}", file=sys.stderr)
        return ACT


def _one_line(exc: BaseException) -> str:
    """The message of `exc` on one line (nbgrader's log in a ReleaseError spans many)."""
    return " ".join(str(exc).split()) or type(exc).__name__


def cmd_release(args, course_dir: Path) -> int:
    from autograder.publish.release import release

    if not args.all and not args.assignment:
        print("autograder release: name an ASSIGNMENT or pass --all", file=sys.stderr)
        return USAGE
    from autograder.course.coursedir import REPO_ROOT

    # the repository's course refreshes exercises/; another course root keeps its copies in <root>/exercises
    exercises = REPO_ROOT / "exercises" if course_dir == (REPO_ROOT / "course").resolve() else course_dir / "exercises"
    decisions = []
    written = release(None if args.all else list(args.assignment), course_root=course_dir, exercises_dir=exercises,
                      db_url=args.db, provided=args.provided, decisions=decisions)
    for decision in decisions:
        if decision.needed:
            print(decision.message())
    print(f"released {len(written)} assignment(s) into {exercises}")
    from autograder.course.coursedir import exchange_root

    exchange = None if args.no_exchange else exchange_root(course_dir)
    if exchange is None:
        print("not released to an exchange: " + ("--no-exchange" if args.no_exchange else
              "the course's nbgrader config names none (c.Exchange.root)"))
        return OK
    from autograder.publish.release import release_to_exchange

    for folder in written:
        print(f"released {folder.name} to the exchange: {release_to_exchange(folder.name, course_dir, args.db)}")
    return OK


def cmd_collect(args, course_dir: Path) -> int:
    from autograder.submissions.collect import collect

    if args.path.exists() or len(args.path.parts) != 1:
        report = collect(course_dir, args.path, db_url=args.db)
    else:  # an assignment's name: from the exchange
        from autograder.submissions.exchange import collect_from_exchange

        report = collect_from_exchange(course_dir, str(args.path), db_url=args.db)
    print(report.table())
    print(report.line())
    return ACT if report.problems else OK


def cmd_grade(args, course_dir: Path) -> int:
    from autograder.grade.engine import grade

    summary = grade(course_dir, args.assignment, db_url=args.db, students=args.student, workers=args.workers,
                    scheduler=args.scheduler, force=args.force, limit_overrides=_limit_overrides(args),
                    allow_unenforced_limits=args.allow_unenforced_limits)
    for row in summary.graded:
        flags = ", ".join(sorted({f["code"] for f in row["flags"]}))
        cpu = "" if row.get("cpu_seconds") is None else f"{row['cpu_seconds']:>6.1f} CPU-s"
        print(f"  {row['student']:<20} {row['notebook']:<28} {row['score']:>6g}/{row['max_score']:<6g} "
              f"{row['status']:<26} {row['seconds']:>6.1f}s {cpu} {flags}")
    for student, why in summary.refused:  # nbgrader autograde fails these too (Autograde.create_student = False)
        print(f"autograder grade: not graded {student}: {why} (add the student to the roster, e.g. "
              f"`nbgrader db student add {student}`, then grade again)", file=sys.stderr)
    print(summary.line())
    return ACT if summary.held or summary.failed or summary.refused else OK


def cmd_feedback(args, course_dir: Path) -> int:
    from autograder.publish.feedback import generate_feedback

    assignments = [args.assignment] if args.assignment else assignments_in_source(course_dir)
    failed = {}
    written = 0
    for assignment in assignments:
        result = generate_feedback(course_dir, assignment, db_url=args.db)
        written += len(result["written"])
        failed.update({f"{assignment}/{s}": log for s, log in result["failed"].items()})
    for key, log in failed.items():
        print(f"feedback failed for {key}:\n{log}", file=sys.stderr)
    print(f"feedback: wrote {written} HTML file(s) under {course_dir / 'feedback'}, {len(failed)} failed")
    from autograder.publish.feedback import waiting_warning
    from autograder.gradebook.queries import waiting_for_grader
    warning = waiting_warning(waiting_for_grader(course_dir, args.db, assignments))
    if warning:
        print(warning, file=sys.stderr)
    return ACT if failed else OK


def cmd_export(args, course_dir: Path) -> int:
    from autograder.publish.export import FORMATS, waiting_line
    from autograder.gradebook.queries import waiting_for_grader

    chosen = FORMATS[args.format]
    path = chosen.write(course_dir, args.to or chosen.default_name, db_url=args.db)
    rows = max(0, sum(1 for _ in open(path)) - 1)
    print(f"export: {rows} row(s) written to {path}")
    print(waiting_line(waiting_for_grader(course_dir, args.db)))
    return OK


def cmd_report(args, course_dir: Path) -> int:
    from autograder.publish.report import write_report

    page = write_report(course_dir, args.assignment, db_url=args.db)
    print(f"report: {page}")
    return OK


def cmd_similarity(args, course_dir: Path) -> int:
    from autograder.checks import stand_ins
    from autograder.publish import similarity as sim

    out = sim.write_similarity(course_dir, args.assignment, lent_code=stand_ins.code_for(args.assignment),
                               threshold=sim.THRESHOLD if args.threshold is None else args.threshold,
                               min_overlap=sim.MIN_OVERLAP if args.min_overlap is None else args.min_overlap,
                               include_reference=args.include_reference)
    result = out["result"]
    for rank, p in enumerate(result.reported, 1):
        print(f"  {rank:>3}. {p.a:<20} {p.b:<20} {100 * p.similarity:5.1f}%  ({p.overlap} shared characters)")
    print(f"similarity: {len(result.reported)} pair(s) of {len(result.students)} students above "
          f"{100 * result.threshold:.0f}% (grades unchanged); {out['html']}, {out['csv']}")
    return OK


def cmd_demo(args, course_dir: Path) -> int:
    from autograder.demo.run import run_demo

    return run_demo(assignments=args.assignments, students=args.students, output=args.output,
                    workers=args.workers)


COMMANDS = {"release": cmd_release, "collect": cmd_collect, "grade": cmd_grade, "feedback": cmd_feedback,
            "export": cmd_export, "report": cmd_report, "similarity": cmd_similarity, "demo": cmd_demo}
