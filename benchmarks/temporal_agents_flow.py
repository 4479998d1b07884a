"""openai-agents on Temporal (``temporalio-openai-agents``): the workflow that
``bench_temporal_agents.py`` runs. Its tool is an activity (``activity_as_tool``), as
an I/O tool must be there; the model request is the plugin's activity."""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    from agents import Agent, Runner
    from temporalio.openai_agents.workflow import activity_as_tool


@activity.defn
async def lookup(key: str) -> dict[str, str]:
    """Look a key up."""
    return {"key": key, "value": key.upper()}


@workflow.defn(name="agents.Loop")
class AgentsLoop:
    """One ``Runner.run`` with the ``lookup`` tool."""

    @workflow.run
    async def run(self, prompt: str) -> str:
        """Run the agent to its final output."""
        tool = activity_as_tool(lookup, start_to_close_timeout=timedelta(seconds=60))
        agent = Agent(name="bench", instructions="Use the tools.", model="m", tools=[tool])
        result = await Runner.run(agent, prompt)
        return str(result.final_output)
