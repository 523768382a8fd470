"""The tuner (TVM's ``tvm.meta_schedule``): design spaces, search, build, measure, database.

Subpackages follow TVM's layout: ``arg_info``, ``database``, ``builder``, ``runner``,
``measure_callback``, ``profiler``, ``logging``, and the search side (``tune_context``,
``search_strategy``, ``space_generator``, ``task_scheduler``, ``cost_model``, ...).
"""
