"""Notebook widgets (ipywidgets + plotly): the faces of reports, tuning and the VM.

Importing this package loads ipywidgets and plotly; nothing below it imports it.
"""
from .report_view import ReportView
from .tuning_dashboard import TuningDashboard, attach_dashboard
from .database_browser import DatabaseBrowser
from .vm_stepper import VMStepper

__all__ = ["ReportView", "VMStepper", "TuningDashboard", "attach_dashboard", "DatabaseBrowser"]
