"""The net layer's unit tests run on asyncio's loop and on uvloop."""

from tests.support.loops import every_event_loop

pytest_asyncio_loop_factories = every_event_loop
