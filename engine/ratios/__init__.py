"""What pricing applies of a calibration: the ratios file read and attached to a config, its stack, the prior and
the local rule's plan features. Fitting ratios on measured runs is engine.calibrate, which sits above pricing."""
