"""Knowledge sources: each yields :class:`~graphs.knowledge.connectors.base.Document` objects
(stable id, title, Markdown, URL to cite, version, access) into the index.

- :mod:`.base`: :class:`Document`, :class:`Listing`, the :class:`Connector` contract, :class:`SourceError`.
- :mod:`.files`: local folders, files and globs (Markdown, MDX, text, HTML, PDF, DOCX, PPTX, XLSX).
- :mod:`.web`: a website from a start page or a sitemap (HTTP under a deadline: :mod:`.fetch`;
  sitemaps: :mod:`.sitemap`).
- :mod:`.git`: one branch of a Git repository.

Conversion to Markdown is :mod:`graphs.knowledge.convert`, shared by all three.
"""

from graphs.knowledge.connectors.base import Connector, Document, Listing, SourceError
from graphs.knowledge.connectors.files import FilesConnector
from graphs.knowledge.connectors.git import GitConnector
from graphs.knowledge.connectors.web import WebConnector

__all__ = ["Connector", "Document", "FilesConnector", "GitConnector", "Listing", "SourceError", "WebConnector"]
