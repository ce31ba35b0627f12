"""The only place torch internals (``torch._dynamo``, ``torch._C._dynamo``) are used.

Everything version-dependent is decided here, once, in :mod:`.versions`; the rest of the
package sees plain Python values: a compile event per compile, cache-entry counts, compile
seconds. Callers import the submodule they need (``from ._torch import hooks``), so a test
that patches one patches what the package calls.

- :mod:`.versions`: the torch version and every feature probe;
- :mod:`.hooks`: the one compile hook torch calls before each frame compile, and its
  guards-built hook, where an entry's guard check is timed on the compiling call;
- :mod:`.events`: the compile event read from torch's compile frame, and function names;
- :mod:`.entries`: cache entries, keeping some and dropping the rest, offering earlier ones;
- :mod:`.dynamic_state`: torch's automatic-dynamic state, whole or per code object;
- :mod:`.fingerprints`: what decides a compile beyond guards (config hashes, input marks);
- :mod:`.backends`: which backend a compile is for, behind torch.compile's wrappers;
- :mod:`.guard_tree`: the leaf guards of an entry, and which one failed;
- :mod:`.instruments`: graph breaks, CUDA-graph recordings, compile seconds, stance, config;
- :mod:`.caches`: compile-cache hits and misses (torch's counters), and the PGO job id;
- :mod:`.cache_events`: each cache lookup of a warm-start child (key, components, status),
  from the structured trace;
- :mod:`.certify`: the shape certificate's torch side: a callable's entries, stand-in inputs
  per point, the entries' guards evaluated on them;
- :mod:`.stand_ins`: stand-in inputs from a call's description (never its tensors);
- :mod:`.reasons`: torch's reason and guard text, parsed (pure: its tests need no torch);
- :mod:`.trace`: torch's structured trace, captured into a file while a block runs;
- :mod:`.footprint`: what a compile leaves besides its entry (graph breaks, counters), replayed
  when an earlier test's compile is reused.
"""
