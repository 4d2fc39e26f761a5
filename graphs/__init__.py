"""The graph: an adaptive RAG graph in LangGraph, free of any chat platform.

=================  ====================================================================
module             holds
=================  ====================================================================
adaptive_rag       the wiring (``build_graph``): edges, where budgets end each loop
nodes              the nodes (one method each), ``GraphDeps``
settings           ``[graph]`` of config.toml (``GraphSettings``) and what the graph runs with (``GraphConfig``)
state              the state, and the contract with the runtime: progress phases
                   (custom stream events), the help payload, the resume value
prompts            every prompt (the router's: ``ROUTE``)
composers          who routes, searches and writes: the chat model, or the extractive composer
graders            who judges documents and drafts: LLM, lexical or extractive graders
schemas            the structured outputs asked of the chat model
messages           the thread's messages, query variants for a search
citations          documents numbered in prompts, citations renumbered in answers
models             chat models and the model caller (retries, budgets, structured output)
http_pool          the hosted model's HTTP client (httpx interface on aiohttp's pool)
knowledge/         the knowledge base: sources, splitting, index, hybrid search, reindex
file_formats       the file formats a knowledge source reads (name endings, default globs)
learned            experts' answers saved as knowledge
web                web search (Tavily)
offline            the model-free pieces, built on first use
offline_router     routing by embeddings, canned replies
extractive         extractive grading and answers
sections           which retrieved section answers a question of a kind (how-to, a page asked for)
verdicts           the yes or the no a yes/no question's documents state
signals            lexical grading signals
terms              the one tokenizer of keyword search and the lexical signals
local_backend      self-check of the offline model's native backend (llama.cpp)
=================  ====================================================================
"""
