"""The planning core: a typed request -> a ranking of plans -> advice.

- :mod:`~gpucost.planning.request`: the request (profile, job, filters, economics,
  constraints), its keywords declared once (``RequestArgs``) and built into it;
- :mod:`~gpucost.planning.ranking`: every plan's $/job, in bounded chunks;
  :mod:`~gpucost.planning.plans`: the ranked plans as typed columns and rows;
- :mod:`~gpucost.planning.fit`: the memory rule every plan passes;
- :mod:`~gpucost.planning.advice` (selection), :mod:`~gpucost.planning.relax`,
  :mod:`~gpucost.planning.reasons` (in words), :mod:`~gpucost.planning.planbuild`;
- :mod:`~gpucost.planning.scaling`: one offer over node counts, the knee, the offer to follow;
- :mod:`~gpucost.planning.breakeven`: stop or destroy a machine between runs, and its defaults;
- :mod:`~gpucost.planning.api`: ``gpucost.compare()`` and ``gpucost.planfile()``.

The command line, the TUI and the Python API call these and format the result; nothing here
imports a front end, pandas (except at the DataFrame edge), torch or textual.
"""
