"""Numerical solvers of the calibration maps, below the methods that use them: the affine-softmax fit
(vector/matrix scaling, Dirichlet calibration) with its grid path's warm starts, and the temperature fit."""
