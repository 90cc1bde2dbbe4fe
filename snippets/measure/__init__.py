"""The commands: ``python -m snippets NAME`` runs ``main`` of ``NAME.py`` here (the list:
:doc:`/docs/reference`). A command's module holds its command line and what no other module of the
package uses; the rest lives with the libraries (:mod:`snippets.hlo`, the teaching modules).
:mod:`~snippets.measure.mode_checks` holds the ``modes`` command's checks."""
