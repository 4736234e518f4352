"""The analysis package's import chains stay short: the longest chain of modules importing one
another inside `depthdelusion.analysis` (imports inside functions count, as lint-imports counts
them) is at most LEVELS modules long, and the package has no cycle (lint-imports checks that)."""
import functools

import grimp

# Issue 49 asks for 8, and 8 it is (the flat package had 14). Modules are siblings rather than a
# tower: a stage that needs only a type imports the module that defines it (law_types,
# report.contents), a computed result is handed in (the report's build computes and passes the
# results to markdown and tables; the verdicts hand the likelihood-ratio tests their refits),
# and the table reader's columns no longer stand on the laws. Several chains are now 8 long,
# e.g. commands → fitting.rollout → fitting.isoflop → fitting.engine → fitting.search →
# fitting.varpro → fitting.problem → fitting.solver, and commands → report.build →
# report.tables → report.contents → fitting.result → fitting.starts → fitting.problem →
# fitting.solver. A ratchet: it must not grow back.
LEVELS = 8


def longest_chain(graph, package: str) -> list[str]:
    modules = [m for m in graph.modules if m.startswith(package)]
    imports = {m: [d for d in graph.find_modules_directly_imported_by(m) if d.startswith(package) and d != m]
               for m in modules}

    @functools.lru_cache(maxsize=None)
    def chain(m):
        return [m] + max((chain(d) for d in imports[m]), key=len, default=[])
    return max((chain(m) for m in modules), key=len)


def test_the_longest_import_chain_in_analysis_is_at_most_levels_long():
    chain = longest_chain(grimp.build_graph("depthdelusion"), "depthdelusion.analysis")
    assert len(chain) <= LEVELS, " -> ".join(chain)


def test_the_chain_is_measured_through_imports_inside_functions(tmp_path, monkeypatch):
    pkg = tmp_path / "chainpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from . import b\n")
    (pkg / "b.py").write_text("from . import c\n")
    (pkg / "c.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    chain = longest_chain(grimp.build_graph("chainpkg", cache_dir=None), "chainpkg.")
    assert chain == ["chainpkg.a", "chainpkg.b", "chainpkg.c"]
