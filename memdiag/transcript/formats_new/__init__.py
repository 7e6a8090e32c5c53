"""Readers of the formats that agents and chat apps really record (issue 10): OpenAI Responses
items, the Agents SDK's SQLite sessions, ChatGPT and Claude.ai data exports, LangGraph state.
Standalone until the formats registry of issue 9 lands; each module registers its format here.
"""

from __future__ import annotations

# the older readers register first: langchain below replaces theirs, and the order of
# FORMATS (the order of detection at equal priority) stays the same however this is imported
import memdiag.transcript.importers  # noqa: F401
from memdiag.transcript.formats import register
from memdiag.transcript.formats_new.agents_sqlite import OpenAIAgentsSQLite
from memdiag.transcript.formats_new.chatgpt import ChatGPTExport
from memdiag.transcript.formats_new.claude import ClaudeExport
from memdiag.transcript.formats_new.langchain import LangChain
from memdiag.transcript.formats_new.responses import OpenAIResponses

register(OpenAIResponses())
register(OpenAIAgentsSQLite())
register(ChatGPTExport())
register(ClaudeExport())
register(LangChain())  # replaces the older reader of importers.py
