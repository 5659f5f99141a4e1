"""The memory console: a browser view of what memstream keeps, served by the API app at /console.

Server-rendered pages from escaping templates (``html``, ``pages``), one small script for the live
view (``static/console.js``), sign-in by one-time link or token form (``session``), and actions
that are memory operations with who and why (``actions``); ``app`` holds the routes.
"""
