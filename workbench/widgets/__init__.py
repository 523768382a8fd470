"""Notebook widgets (ipywidgets + plotly): the faces of reports, tuning and the VM.

Importing this package loads ipywidgets and plotly; nothing below it imports it.
"""
from .report_view import ReportView

__all__ = ["ReportView"]
