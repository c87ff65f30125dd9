"""TensorFlow runtime: zoo (training steps), extract (graph -> instance), profile (Standard Evaluation),
commfit (link model), execute (run a placement, verify, measure), cli (``dplace profile``/``execute``).

Importing this package does not import TensorFlow; each module imports it inside its functions.
"""
