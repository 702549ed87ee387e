"""The service's routes, one ``APIRouter`` per area, each built by ``build_router(state)``.

``service`` (health), ``videos`` (the OpenAI Videos API), ``uploads`` (reference images),
``jobs`` (whole director's scripts), ``sweeps`` (one script over a grid of seeds and settings,
a group of jobs), ``presets`` (named backend settings the console offers) and ``scripts``
(validate, schema, plan preview and render plan for the web console). ``create_app`` includes them in that order, which is also the order of the
paths in ``/openapi.json``. Errors are raised, not answered here: ``create_app`` installs
one handler for the whole ``daotai.errors`` tree (and the store's refusals).
"""
