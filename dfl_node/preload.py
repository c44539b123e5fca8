"""What the launcher's forkserver imports before it forks any node.

Importing torch and the node code once, in the forkserver, saves every node that cost. Freezing
the garbage collector afterwards moves those objects out of the collector's reach, so a node's
collections never write to (and so never copy) the pages it shares with its siblings.
"""

import gc

import torch  # noqa: F401
import zmq  # noqa: F401

import dfl_node.cli  # noqa: F401

gc.freeze()
