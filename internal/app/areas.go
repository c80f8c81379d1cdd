package app

// Areas is the list of Gantry's areas, in the navigation's order. Adding an
// area adds its files (CONTRIBUTING.md, "Adding an area") and one line here.
func Areas() []Area {
	return []Area{
		infraArea,
		environmentsArea,
		daemonsArea,
		modulesArea,
		pipelinesArea,
	}
}
