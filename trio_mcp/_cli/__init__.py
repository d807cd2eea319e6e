"""The ``trio-mcp`` command line and its demo (``python -m trio_mcp``).

:mod:`._main` parses the arguments and turns failures into exit statuses;
:mod:`._commands` and :mod:`._features` are the commands, :mod:`._connect`
connects a client App to a server, :mod:`._terminal` asks a human on the
terminal; :mod:`._demo`, :mod:`._demo_view` and :mod:`._demo_scenario` are the
two-agent demo. Nothing in the library imports this package.
"""

from ._main import main as main
