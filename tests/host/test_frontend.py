"""The frontend's allowance through the host's interleaving machine: the frontend grows and
shrinks as names are seen while loads, evictions and worker deaths overlap. While it stays within
its allowance the room for models is the room said at start; past it, the server may go over its
budget by no more than the growth, until the memory watch evicts idle models. Every other
invariant of tests/host/machine.py holds."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import rule

from host.fakes import BUDGET_BYTES
from host.machine import Interleavings, checked, runs_of_30_steps
from modelhost.cache.memory import FrontendAllowance, MemoryBudget, MemoryTier
from modelhost.host.memory_readings import PssReading

MiB = 2**20
FRONTEND = FrontendAllowance(start_bytes=10 * MiB, growth_bytes=8 * MiB)


class FrontendInterleavings(Interleavings):
    """The host's machine, its budget paying for a frontend that grows as the rules say."""

    def make_memory(self) -> MemoryTier:
        self.frontend_bytes = self.most_frontend_bytes = FRONTEND.start_bytes
        budget = BUDGET_BYTES + FRONTEND.bytes  # the same room for models as the plain machine
        return MemoryTier(
            MemoryBudget(budget, FRONTEND.start_bytes, frontend=FRONTEND), clock=self.clock
        )

    def read_pss(self) -> PssReading:
        workers = sum(r.bytes for r in self.memory)
        return PssReading(workers + self.frontend_bytes, self.frontend_bytes)

    @rule(growth_mib=st.integers(-10, 12))
    def names_pass_through_the_frontend(self, growth_mib: int) -> None:
        """Per-name state grows (or is collected); the memory watch reads the server at once and
        relieves the pressure, as its upkeep loop does every second."""
        self.frontend_bytes = FRONTEND.start_bytes + growth_mib * MiB
        self.most_frontend_bytes = max(self.most_frontend_bytes, self.frontend_bytes)
        reading = self.read_pss()
        self.memory.observe(reading.total_bytes, self.memory.released_bytes, self.frontend_bytes)
        self.start(self.host.residency.relieve_pressure(), self.chores)

    @checked
    def never_over_budget(self) -> None:
        """Only the frontend's growth past its allowance puts the server over its budget, by no
        more than its most growth (the baseline keeps it while loads are in motion) until the
        memory watch evicts idle models: no reservation commits past the budget."""
        over_bytes = self.memory.committed_bytes - self.memory.budget.budget_bytes
        assert over_bytes <= max(0, self.most_frontend_bytes - FRONTEND.bytes), over_bytes

    @checked
    def the_room_for_models_holds_while_the_frontend_keeps_its_allowance(self) -> None:
        if self.most_frontend_bytes <= FRONTEND.bytes:
            assert self.memory.budget.capacity_bytes == BUDGET_BYTES

    @checked
    def growth_past_the_allowance_is_counted(self) -> None:
        excess = max(0, self.memory.budget.frontend_bytes - FRONTEND.bytes)
        assert self.memory.budget.baseline_bytes >= FRONTEND.bytes + excess


FrontendInterleavings.TestCase.settings = runs_of_30_steps(200)
TestTheFrontendAllowanceUnderAnyInterleaving = FrontendInterleavings.TestCase
